// device_counters: the device-side measures that are the same for every peer (call counts,
// bytes in use, capacity), from simcuda's control API or, on any other driver, from the
// counting interposer and cudaMemGetInfo. See Note [Counting device calls].
// Invariant: every function is safe to call whatever is loaded (a measure with no source
// reads 0, a setting with no way to apply it returns false); simulated() is true only when
// simcuda's control API drives the device, and only then is the control API used at all.
#pragma once

#include <cstdint>

namespace fragless::bench {

// Note [Counting device calls]
// On simcuda the counts are simcuda's own (simcuda_call_count: the program's calls, not the
// runtime's internal ones). A real driver has no such counters: there fragless-bench
// LD_PRELOADs libfragless_bench_counting.so (bench/counting) into each replay child, which
// counts the same functions under the same names as they pass, including those reached
// through cuGetProcAddress / cudaGetDriverEntryPoint(ByVersion) (fragless's backend and
// c10's DriverAPI reach cuMem* that way). FRAGLESS_BENCH_COUNTING picks the source:
//   auto (default)  simcuda's counters when its control API is loaded, else the interposer
//   simcuda         simcuda's counters (the control API must be loaded)
//   interposer      the interposer, and no simcuda control API at all: the device is driven
//                   exactly as a real GPU would be (no capacity, no call costs, no
//                   auto-complete); CI runs it on simcuda and checks that both sources agree
//                   call by call (tests/bench/counting_differential.py).
// Bytes in use without simcuda are cudaMemGetInfo's total - free: the whole device's,
// other processes and the CUDA context included (Note [Memory generation]).

// Note [Host time without emulation]
// simcuda emulates each device call with host system calls (an mmap per cuMemMap, an
// mprotect per cuMemSetAccess), a few microseconds that are simcuda's, not the allocator's
// and not what a real driver spends: the cost model prices every call from a table measured
// on a GPU (Note [Cost model]). So on simcuda the replayer asks for the priced functions to
// be timed (simcuda's Note [Emulation time]) and subtracts the time its thread spent inside
// them from each timed allocator call: host time is the allocator's own work, the same
// for a peer that makes ten calls or ten thousand, and the emulation's time is reported
// beside it. The interposer has no such clock: there (a real GPU) host time includes each
// call's real price.

// Note [Memory generation]
// A number that changes whenever the device memory in use may have changed: simcuda's bytes
// in use, or the interposer's count of allocating, freeing, mapping and unmapping calls
// (never reset). The replayer re-reads an allocator's reserved bytes only when it changed
// (Note [Peak over the run]), and without simcuda cudaMemGetInfo is asked again only then.

enum class counting_source { none, simcuda, interposer };

struct device_call_counts {
  std::uint64_t allocs = 0;  // cudaMalloc, cuMemCreate, cu/cudaMallocAsync, cuMemAlloc(_v2)
  std::uint64_t frees = 0;   // cudaFree, cuMemRelease, cu/cudaFreeAsync, cuMemFree(_v2)
  std::uint64_t maps = 0;    // cuMemMap
  std::uint64_t unmaps = 0;  // cuMemUnmap
  std::uint64_t syncs = 0;   // device / stream / event / context synchronisations
  std::uint64_t total() const { return allocs + frees + maps + unmaps; }
  bool operator==(const device_call_counts&) const = default;
};

// Reads the device's memory in use in bytes (cudaMemGetInfo: total - free); false on failure.
// Supplied by the caller from the bench's CUDA boundary (replay/cuda_device.hpp).
using device_used_bytes_reader = bool (*)(std::uint64_t* used_bytes);

class device_counters {
public:
  // The source FRAGLESS_BENCH_COUNTING selects (Note [Counting device calls]); `reader` gives
  // the bytes in use when simcuda does not.
  explicit device_counters(device_used_bytes_reader reader = nullptr);
  counting_source source() const { return source_; }
  bool available() const { return source_ != counting_source::none; }
  // simcuda's control API drives the device (capacity, call costs, auto-complete).
  bool simulated() const { return source_ == counting_source::simcuda; }
  void reset() const;
  device_call_counts read() const;
  // Calls of one named function since the last reset (0 without a source).
  std::uint64_t count(const char* function_name) const;
  std::uint64_t used_bytes() const;
  std::uint64_t memory_generation() const;  // Note [Memory generation]
  bool set_capacity(std::uint64_t bytes) const;
  bool set_call_cost_ns(const char* function_name, std::uint64_t nanoseconds) const;
  void set_auto_complete(bool on) const;
  // Note [Host time without emulation]: times simcuda's calls of a function (false when
  // not simulated); the calling thread's total time inside timed calls (0 when not).
  bool time_emulation(const char* function_name) const;
  std::uint64_t thread_emulation_ns() const;

  // Whether simcuda's control API is loaded in this process (whatever the selected source).
  static bool simcuda_control_loaded();
  // FRAGLESS_BENCH_COUNTING's value as a source name ("auto" when unset or unknown; an
  // unknown value warns once on stderr).
  static const char* requested_source();

private:
  counting_source source_ = counting_source::none;
  device_used_bytes_reader reader_ = nullptr;
  mutable std::uint64_t cached_generation_ = ~std::uint64_t{0};
  mutable std::uint64_t cached_used_bytes_ = 0;
};

}  // namespace fragless::bench
