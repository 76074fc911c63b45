// calibrate_backend: measures the host cost of each priced device call (cost_table.hpp)
// on the device this process runs on. The only cost-model file that calls CUDA (it is
// compiled into fragless_bench_peers, the CUDA-linked part of the benchmark).
// Invariant: each measured allocation is freed right after it is measured; the first failed
// call stops the measurement and is reported in `error`.
#pragma once

#include "cost_table.hpp"

#include <string>
#include <utility>
#include <vector>

namespace fragless::bench {

struct calibration {
  cost_table table;       // medians per function and size
  std::string device;     // the device's name
  std::string error;      // non-empty when calibration could not run
};

// `repetitions` timed calls per function and size (median kept).
calibration calibrate_device_calls(int repetitions);

}  // namespace fragless::bench
