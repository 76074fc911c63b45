// peer_pytorch: PyTorch's native caching allocator driven through its C++ API
// (raw_alloc_with_stream / raw_delete / getDeviceStats / emptyCache).
// Invariant: this is the only bench file that includes torch headers; c10 exceptions never
// escape (an OOM becomes nullptr).
#include "peer_pytorch.hpp"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/PeerToPeerAccess.h>
#include <cuda_runtime_api.h>

#include <exception>

namespace fragless::bench {

namespace {

namespace native = c10::cuda::CUDACachingAllocator;

class pytorch_peer final : public replay_allocator {
public:
  void* allocate(std::uint64_t size_bytes, stream_handle stream) noexcept override {
    try {
      return native::raw_alloc_with_stream(static_cast<std::size_t>(size_bytes), static_cast<cudaStream_t>(stream));
    } catch (const std::exception& e) {
      last_failure_ = e.what();
      return nullptr;
    }
  }
  void deallocate(void* pointer, std::uint64_t, stream_handle) noexcept override {
    try {
      native::raw_delete(pointer);
    } catch (const std::exception&) {
    }
  }
  std::uint64_t reserved_bytes() noexcept override {
    try {
      const auto stats = native::getDeviceStats(0);
      return static_cast<std::uint64_t>(stats.reserved_bytes[0].current);  // [0] = aggregate
    } catch (const std::exception&) {
      return 0;
    }
  }
  void release_cached() noexcept override {
    try {
      native::emptyCache();
    } catch (const std::exception&) {
    }
  }
  std::string last_failure() const override { return last_failure_; }

private:
  std::string last_failure_;
};

}  // namespace

std::unique_ptr<replay_allocator> make_pytorch_peer(std::string& why_not) {
  try {
    int device_count = 0;
    if (cudaGetDeviceCount(&device_count) != cudaSuccess || device_count < 1) {
      why_not = "no CUDA device visible";
      return nullptr;
    }
    // What torch's lazy CUDA init does before the allocator's first use (expandable
    // segments query fabric access through the peer-to-peer cache).
    c10::cuda::detail::init_p2p_access_cache(device_count);
    native::init(device_count);
    return std::make_unique<pytorch_peer>();
  } catch (const std::exception& e) {
    why_not = std::string("PyTorch allocator failed to start: ") + e.what();
    return nullptr;
  }
}

}  // namespace fragless::bench
