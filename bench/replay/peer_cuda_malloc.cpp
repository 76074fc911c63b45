// peer_cuda_malloc: plain cudaMalloc/cudaFree per request, no caching. The baseline a
// caching allocator exists to beat on host time, and the floor-plus-rounding on memory.
// Invariant: reserved_bytes is the sum of live requests rounded up to 512 B (what the
// driver hands out at the allocation granularity we model); nothing is cached.
#include "peer_cuda_malloc.hpp"

#include "ideal.hpp"

#include <cuda_runtime_api.h>

namespace fragless::bench {

namespace {

class cuda_malloc_peer final : public replay_allocator {
public:
  void* allocate(std::uint64_t size_bytes, stream_handle) noexcept override {
    void* pointer = nullptr;
    if (cudaMalloc(&pointer, static_cast<std::size_t>(size_bytes)) != cudaSuccess) {
      (void)cudaGetLastError();  // clear the sticky-free error state
      return nullptr;
    }
    reserved_bytes_ += round_up(size_bytes, block_rounding_bytes);
    return pointer;
  }
  void deallocate(void* pointer, std::uint64_t size_bytes, stream_handle) noexcept override {
    if (cudaFree(pointer) == cudaSuccess) reserved_bytes_ -= round_up(size_bytes, block_rounding_bytes);
  }
  std::uint64_t reserved_bytes() noexcept override { return reserved_bytes_; }
  void release_cached() noexcept override {}

private:
  std::uint64_t reserved_bytes_ = 0;
};

}  // namespace

std::unique_ptr<replay_allocator> make_cuda_malloc_peer() {
  return std::make_unique<cuda_malloc_peer>();
}

}  // namespace fragless::bench
