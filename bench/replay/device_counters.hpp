// device_counters: the device-side measures that are the same for every peer, read from
// simcuda's control API (call counts, capacity, bytes in use). Resolved at run time with
// dlsym so the benchmark still runs (without these measures) on a real CUDA stack.
// Invariant: every function is safe to call when simcuda is absent (returns 0 / false).
#pragma once

#include <cstdint>

namespace fragless::bench {

struct device_call_counts {
  std::uint64_t allocs = 0;  // cudaMalloc, cuMemCreate, cu/cudaMallocAsync, cuMemAlloc(_v2)
  std::uint64_t frees = 0;   // cudaFree, cuMemRelease, cu/cudaFreeAsync, cuMemFree(_v2)
  std::uint64_t maps = 0;    // cuMemMap
  std::uint64_t unmaps = 0;  // cuMemUnmap
  std::uint64_t syncs = 0;   // device / stream / event / context synchronisations
  std::uint64_t total() const { return allocs + frees + maps + unmaps; }
};

class device_counters {
public:
  device_counters();
  bool available() const { return available_; }
  void reset() const;
  device_call_counts read() const;
  // Calls of one named function since the last reset (0 without simcuda).
  std::uint64_t count(const char* function_name) const;
  std::uint64_t used_bytes() const;
  bool set_capacity(std::uint64_t bytes) const;
  bool set_call_cost_ns(const char* function_name, std::uint64_t nanoseconds) const;
  void set_auto_complete(bool on) const;

private:
  bool available_ = false;
};

}  // namespace fragless::bench
