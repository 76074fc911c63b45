// cuda_device: see header.
#include "cuda_device.hpp"

#include <cuda_runtime_api.h>

namespace fragless::bench {

device_facts query_device() noexcept {
  device_facts facts;
  try {
    cudaDeviceProp properties{};
    cudaError_t status = cudaGetDeviceProperties(&properties, 0);
    if (status == cudaSuccess) {
      facts.name = properties.name;
      std::size_t free_bytes = 0, total_bytes = 0;
      status = cudaMemGetInfo(&free_bytes, &total_bytes);
      facts.free_bytes = free_bytes;
      facts.total_bytes = total_bytes;
    }
    if (status != cudaSuccess) {
      facts.error = std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
      (void)cudaGetLastError();
      return facts;
    }
    facts.ok = true;
  } catch (...) {
    facts.ok = false;
  }
  return facts;
}

bool read_device_used_bytes(std::uint64_t* used_bytes) {
  std::size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  *used_bytes = total_bytes >= free_bytes ? total_bytes - free_bytes : 0;
  return true;
}

}  // namespace fragless::bench
