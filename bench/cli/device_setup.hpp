// device_setup: how a run drives the device -- simcuda through its control API, or a real
// GPU (or simcuda forced to act as one) with the counting interposer -- decided once in the
// parent before any replay, and the lines the report records about it.
// Invariant: a setting a real GPU cannot honour (a capacity other than the device's memory,
// per-call costs) is refused before anything runs, with one line saying why; simcuda keeps
// every setting (Note [Capacity on a real GPU]).
#pragma once

#include <cstdint>
#include <string>

namespace fragless::bench {

struct bench_options;

// Note [Capacity on a real GPU]
// simcuda's capacity is set per replay (--capacity; the fit rows search at 24 GiB unless
// told). A real device's cannot be: there the fit rows search at the device's total memory
// (cudaMemGetInfo in a probe child, so that the parent holds no CUDA context), and the
// report says so. --capacity larger than the device cannot be honoured; a smaller one could
// only be imitated per peer (fragless's and PyTorch's limits work differently, cudaMalloc
// has none), which would compare the peers' limits rather than their fragmentation: both are
// refused with one line. --device-call-ns (simcuda's modelled call prices) is refused too:
// a real GPU's calls cost what they cost. The fit rows' capacity includes what the CUDA
// context and other processes on the device take.

struct device_setup {
  bool simulated = true;                 // simcuda's control API drives the device
  std::string counting_library;          // LD_PRELOADed into replay children (empty: none)
  std::uint64_t device_total_bytes = 0;  // real device: its memory (cudaMemGetInfo total)
  // The report's header lines (results.json "device", "counting", "capacity").
  std::string device_line;    // FRAGLESS_BENCH_DEVICE, or detected
  std::string counting_line;  // how device calls and bytes in use are measured
  std::string capacity_line;  // what the capacity and the fit rows' capacity are
};

// Decides the setup for `options` (FRAGLESS_BENCH_COUNTING, FRAGLESS_BENCH_DEVICE, what is
// loaded), probing a real device in a child process. Throws std::invalid_argument with one
// line for a refused option, std::runtime_error when no device answers.
device_setup prepare_device(const bench_options& options);

// The fit rows' capacity: --capacity, 24 GiB on simcuda, the device's memory on a GPU
// (0 = do not set it in the child).
std::uint64_t fit_capacity_to_set(const bench_options& options);

}  // namespace fragless::bench
