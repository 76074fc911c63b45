// Proof that simcuda is a usable CUDA: libc10_cuda's own CUDACachingAllocator (from the
// pinned torch wheel) allocates, caches, frees and reports stats on it. Registered twice by
// ctest: with the default settings (device memory from cudaMalloc) and with
// PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (memory from the VMM API).
#include <c10/core/Allocator.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/PeerToPeerAccess.h>
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "simcuda/control.h"

// libtorch_cuda normally installs this hook (CUDAHooks); c10 alone has only a throwing
// placeholder, and the allocator's device guards call it.
namespace c10::cuda::_internal {
void setHasPrimaryContext(bool (*function)(c10::DeviceIndex));
}

namespace {

bool has_primary_context(c10::DeviceIndex device) {
  unsigned int flags = 0;
  int active = 0;
  return cuDevicePrimaryCtxGetState(device, &flags, &active) == CUDA_SUCCESS && active != 0;
}

namespace allocator = c10::cuda::CUDACachingAllocator;
constexpr size_t kAggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);

bool expandable_requested() {
  const char* conf = std::getenv("PYTORCH_CUDA_ALLOC_CONF");
  return conf != nullptr && std::string(conf).find("expandable_segments:True") != std::string::npos;
}

void require_simcuda_and_init() {
  cudaDeviceProp properties{};
  REQUIRE(cudaGetDeviceProperties(&properties, 0) == cudaSuccess);
  REQUIRE(std::string(properties.name) == "simcuda");
  static bool initialized = [] {
    // What libtorch_cuda's lazy initialisation does before the allocator is used.
    c10::cuda::_internal::setHasPrimaryContext(&has_primary_context);
    c10::cuda::detail::init_p2p_access_cache(c10::cuda::device_count());
    allocator::init(c10::cuda::device_count());
    return true;
  }();
  REQUIRE(initialized);
}

}  // namespace

TEST_CASE("c10 caching allocator: raw_alloc / raw_delete and caching") {
  require_simcuda_and_init();
  simcuda_reset_counters();
  void* small = allocator::raw_alloc(1000);
  void* large = allocator::raw_alloc(30u << 20);
  REQUIRE(small != nullptr);
  REQUIRE(large != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(small) % 512 == 0);
  CHECK(simcuda_is_accessible(small, 1000) == 1);
  CHECK(simcuda_is_accessible(large, 30u << 20) == 1);
  // The memory is real: write through the runtime and read it back.
  std::vector<unsigned char> pattern(1000, 0x5A), back(1000, 0);
  REQUIRE(cudaMemcpy(small, pattern.data(), 1000, cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaMemcpy(back.data(), small, 1000, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(back == pattern);

  auto stats = allocator::getDeviceStats(0);
  CHECK(stats.allocated_bytes[kAggregate].current >= static_cast<int64_t>(1000 + (30u << 20)));
  CHECK(stats.reserved_bytes[kAggregate].current >= stats.allocated_bytes[kAggregate].current);
  CHECK(simcuda_used_bytes(0) >= static_cast<uint64_t>(stats.reserved_bytes[kAggregate].current));

  allocator::raw_delete(small);
  allocator::raw_delete(large);
  stats = allocator::getDeviceStats(0);
  CHECK(stats.allocated_bytes[kAggregate].current == 0);
  CHECK(stats.reserved_bytes[kAggregate].current > 0);  // cached, not returned

  // A second allocation of the same size reuses the cache: no new device memory.
  uint64_t used_before = simcuda_used_bytes(0);
  void* again = allocator::raw_alloc(30u << 20);
  CHECK(simcuda_used_bytes(0) == used_before);
  allocator::raw_delete(again);

  if (expandable_requested()) {
    CHECK(simcuda_call_count("cuMemCreate") > 0);
    CHECK(simcuda_call_count("cuMemMap") > 0);
    CHECK(simcuda_call_count("cuMemSetAccess") > 0);
  } else {
    CHECK(simcuda_call_count("cudaMalloc") > 0);
    CHECK(simcuda_call_count("cuMemMap") == 0);
  }
}

TEST_CASE("c10 caching allocator: DataPtr, streams and emptyCache") {
  require_simcuda_and_init();
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
  {
    c10::DataPtr data = allocator::get()->allocate(5u << 20);
    REQUIRE(data.get() != nullptr);
    CHECK(data.device().is_cuda());
    REQUIRE(cudaMemsetAsync(data.get(), 7, 5u << 20, side.stream()) == cudaSuccess);
    allocator::recordStream(data, side);
  }  // freed while `side` may still use it: the allocator records an event
  REQUIRE(cudaStreamSynchronize(side.stream()) == cudaSuccess);

  allocator::emptyCache();
  auto stats = allocator::getDeviceStats(0);
  CHECK(stats.allocated_bytes[kAggregate].current == 0);
  CHECK(stats.reserved_bytes[kAggregate].current == 0);
  CHECK(stats.num_device_alloc > 0);
  CHECK(stats.num_device_free > 0);
  CHECK(simcuda_used_bytes(0) == 0);  // every byte went back to the device
  if (expandable_requested()) CHECK(simcuda_call_count("cuMemUnmap") > 0);
  else CHECK(simcuda_call_count("cudaFree") > 0);
  CHECK(simcuda_race_count() == 0);
}

TEST_CASE("c10 caching allocator: out of memory is a c10::OutOfMemoryError") {
  require_simcuda_and_init();
  size_t free_bytes = 0, total_bytes = 0;
  REQUIRE(cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess);
  const uint64_t original = simcuda_capacity(0);
  REQUIRE(simcuda_set_capacity(0, simcuda_used_bytes(0) + (64u << 20)) == 0);
  CHECK_THROWS_AS(allocator::raw_alloc(size_t{1} << 30), c10::OutOfMemoryError);
  REQUIRE(simcuda_set_capacity(0, original) == 0);
  void* fits = allocator::raw_alloc(16u << 20);
  CHECK(fits != nullptr);
  allocator::raw_delete(fits);
  allocator::emptyCache();
}
