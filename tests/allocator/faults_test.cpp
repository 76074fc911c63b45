// Fault injection on every device call the allocator makes (simcuda_fail): each call
// number of each function fails once, with an out-of-memory code and with a generic one,
// in VMM and cudaMalloc modes. Afterwards: no crash, stats consistent with the snapshot,
// allocation failures are fragless errors (OOM text as specified), and once everything is
// freed and the cache emptied the device is back to its starting usage (no leak).
#include <catch2/catch.hpp>

#include <simcuda/control.h>

#include <cstdio>
#include <cstdlib>
#include <unistd.h>
#include <string>
#include <vector>

#include "consistency.hpp"
#include "simcuda_support.hpp"

using namespace fragless;
using namespace fragless::testing;

namespace {

constexpr int kRuntimeOutOfMemory = 2;  // cudaErrorMemoryAllocation
constexpr int kDriverOutOfMemory = 2;   // CUDA_ERROR_OUT_OF_MEMORY
constexpr int kUnknown = 999;           // cudaErrorUnknown / CUDA_ERROR_UNKNOWN

const char* const kFunctions[] = {
    "cudaMalloc",          "cudaFree",        "cuMemCreate",         "cuMemMap",
    "cuMemSetAccess",      "cuMemUnmap",      "cuMemRelease",        "cuMemAddressReserve",
    "cudaEventCreateWithFlags", "cudaEventRecord", "cudaEventQuery", "cudaStreamWaitEvent",
    "cudaDeviceSynchronize", "cudaMemGetInfo", "cudaStreamGetDevice", "cudaEventDestroy",
    "cudaStreamIsCapturing"};

struct outcome {
  int errors = 0;
  int oom_errors = 0;
};

// A small fixed workload touching every path: slabs, large blocks, page moves, pending
// frees, cross-stream reuse, empty_cache, the OOM path (capacity is small).
outcome workload(core::allocator& instance, void* stream_a, void* stream_b) {
  outcome result;
  std::vector<void*> live;
  auto try_allocate = [&](std::size_t size, void* stream) -> void* {
    try {
      void* block = instance.allocate(size, 0, stream);
      if (block != nullptr) {
        live.push_back(block);
        simcuda_launch(stream, block, size, 1);
      }
      return block;
    } catch (const out_of_memory_error& oom) {
      ++result.errors;
      ++result.oom_errors;
      CHECK(std::string(oom.what()).rfind("CUDA out of memory. Tried to allocate ", 0) == 0);
      return nullptr;
    } catch (const error&) {
      ++result.errors;
      return nullptr;
    }
  };
  auto free_last = [&](std::size_t count) {
    for (std::size_t i = 0; i < count && !live.empty(); ++i) {
      instance.deallocate(live.back());
      live.pop_back();
    }
  };
  try_allocate(1000, stream_a);
  try_allocate(70000, stream_a);
  void* shared = try_allocate(3 << 20, stream_a);
  if (shared != nullptr) {
    try {
      instance.record_stream(shared, stream_b);
    } catch (const error&) {
      ++result.errors;
    }
  }
  try_allocate(9 << 20, stream_b);
  free_last(2);
  try_allocate(5 << 20, stream_b);   // cross-stream reuse
  try_allocate(40 << 20, stream_a);  // growth, page moves
  try_allocate(220 << 20, stream_a);  // more than the device has left even without cache: OOM path
  simcuda_complete_all();
  try_allocate(2 << 20, stream_a);
  free_last(3);
  try {
    instance.device(0).release_cache(0);
  } catch (const error&) {
    ++result.errors;
  }
  try_allocate(600, stream_b);
  try_allocate(6 << 20, stream_b);
  simcuda_complete_all();
  free_last(live.size());
  return result;
}

outcome run_with_fault(bool use_vmm, const char* function, std::uint64_t nth, int code, int mode) {
  reset_simcuda();
  void* stream_a = create_stream(0);
  void* stream_b = create_stream(0);
  const std::uint64_t used_before = simcuda_used_bytes(0);
  outcome seen;
  {
    REQUIRE(simcuda_fail(function, nth, code, mode) == 0);
    std::unique_ptr<core::allocator> instance;
    try {
      instance = make_simcuda_allocator(core::cache_settings::for_backend(use_vmm));
      instance->device(0);
    } catch (const error&) {
      // Initialisation itself may fail (cudaMemGetInfo, cuMemAddressReserve fall back):
      // a clear error, then a clean retry.
      simcuda_clear_faults();
      instance = make_simcuda_allocator(core::cache_settings::for_backend(use_vmm));
    }
    seen = workload(*instance, stream_a, stream_b);
    simcuda_clear_faults();
    simcuda_complete_all();
    check_releases_everything(instance->device(0));
    CHECK(simcuda_used_bytes(0) == used_before);
  }
  CHECK(simcuda_used_bytes(0) == used_before);
  INFO(race_report());
  CHECK(simcuda_race_count() == 0);
  destroy_stream(stream_a);
  destroy_stream(stream_b);
  return seen;
}

}  // namespace

TEST_CASE("every device call failing once leaves no crash, no leak, consistent stats", "[faults]") {
  REQUIRE(simcuda_set_capacity(0, std::uint64_t{256} << 20) == 0);
  for (bool use_vmm : {true, false}) {
    // How often each function is called by a clean run decides which call numbers to fail.
    reset_simcuda();
    {
      void* stream_a = create_stream(0);
      void* stream_b = create_stream(0);
      simcuda_reset_counters();
      auto instance = make_simcuda_allocator(core::cache_settings::for_backend(use_vmm));
      const outcome clean = workload(*instance, stream_a, stream_b);
      CHECK(clean.oom_errors == 1);  // the 220 MiB request
      CHECK(clean.errors == 1);
      destroy_stream(stream_a);
      destroy_stream(stream_b);
    }
    std::vector<std::pair<const char*, std::uint64_t>> calls;
    for (const char* function : kFunctions) calls.push_back({function, simcuda_call_count(function)});
    int exercised = 0;
    int runs = 0;
    int runs_with_errors = 0;  // outcome differs from the clean run: the faults did fire
    for (auto [function, count] : calls) {
      if (count == 0) continue;
      ++exercised;
      const bool driver = function[0] == 'c' && function[1] == 'u' && function[2] == 'M';
      // Every call number up to 12, then a stride through the rest (every one of them with
      // FRAGLESS_TEST_FAULTS=all): page calls come by the hundred and behave alike.
      const bool every_call = std::getenv("FRAGLESS_TEST_FAULTS") != nullptr &&
                              std::string(std::getenv("FRAGLESS_TEST_FAULTS")) == "all";
      const std::uint64_t stride = every_call || count <= 24 ? 1 : count / 12;
      for (std::uint64_t nth = 1; nth <= count; nth += nth < 12 ? 1 : stride) {
        for (int code : {driver ? kDriverOutOfMemory : kRuntimeOutOfMemory, kUnknown}) {
          INFO("vmm " << use_vmm << ": " << function << " call " << nth << " of " << count << " fails with " << code);
          const outcome seen = run_with_fault(use_vmm, function, nth, code, SIMCUDA_FAIL_ONCE);
          ++runs;
          runs_with_errors += seen.errors != 1 || seen.oom_errors != 1;
          if (std::getenv("FAULTS_DEBUG")) std::fprintf(stderr, "%d %s %d %d errors=%d\n", use_vmm, function, int(nth), code, seen.errors);
        }
      }
      INFO("vmm " << use_vmm << ": " << function << " fails from its first call on");
      run_with_fault(use_vmm, function, 1, kUnknown, SIMCUDA_FAIL_FROM_NTH);
    }
    CHECK(exercised >= (use_vmm ? 10 : 8));
    INFO(runs_with_errors << " of " << runs << " runs reported extra errors");
    CHECK(runs_with_errors > runs / 20);
  }
}

// A page that cannot be unmapped stays reserved after empty_cache -- and the log says so.
TEST_CASE("a failed unmap is reported, and the page goes at the next release", "[faults][unmap]") {
  reset_simcuda();
  void* stream = create_stream(0);
  {
    auto instance = make_simcuda_allocator(core::cache_settings::for_backend(true));
    core::device_cache& cache = instance->device(0);
    void* block = instance->allocate(std::size_t{6} << 20, 0, stream);
    instance->deallocate(block);
    REQUIRE(simcuda_fail("cuMemUnmap", 1, 999, SIMCUDA_FAIL_FROM_NTH) == 0);
    std::fflush(stderr);
    char path[] = "/tmp/fragless-unmap-log-XXXXXX";
    const int file = ::mkstemp(path);
    const int saved = ::dup(STDERR_FILENO);
    ::dup2(file, STDERR_FILENO);
    cache.release_cache(0);
    std::fflush(stderr);
    ::dup2(saved, STDERR_FILENO);
    ::close(saved);
    std::string logged(4096, '\0');
    const ssize_t n = ::pread(file, logged.data(), logged.size(), 0);
    logged.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    ::close(file);
    ::unlink(path);
    simcuda_clear_faults();
    INFO(logged);
    CHECK(logged.find("could not be unmapped and stay reserved") != std::string::npos);
    CHECK(cache.stats().reserved_bytes[pool_all].current > 0);
    cache.release_cache(0);
    CHECK(cache.stats().reserved_bytes[pool_all].current == 0);
    check_consistency(cache.snapshot(), cache.stats());
  }
  destroy_stream(stream);
}
