// cuda_streams: see header.
#include "cuda_streams.hpp"

#include <cuda_runtime_api.h>

#include <stdexcept>

namespace fragless::bench {

std::vector<stream_handle> create_replay_streams(std::uint32_t count) {
  std::vector<stream_handle> streams;
  streams.push_back(nullptr);
  for (std::uint32_t i = 1; i < count; ++i) {
    cudaStream_t stream = nullptr;
    const cudaError_t status = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    if (status != cudaSuccess) {
      destroy_replay_streams(streams);
      throw std::runtime_error(std::string("cudaStreamCreateWithFlags failed: ") + cudaGetErrorString(status));
    }
    streams.push_back(stream);
  }
  return streams;
}

void destroy_replay_streams(const std::vector<stream_handle>& streams) noexcept {
  for (stream_handle stream : streams) {
    if (stream != nullptr) (void)cudaStreamDestroy(static_cast<cudaStream_t>(stream));
  }
}

}  // namespace fragless::bench
