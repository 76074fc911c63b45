// Shared by the simcuda tests: the check that the process really runs on simcuda (never on
// a real GPU or the real runtime by accident), and small helpers.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>

#include "simcuda/control.h"

namespace simcuda_test {

// Fails the test unless device 0 is simcuda's.
inline void require_simcuda() {
  cudaDeviceProp properties{};
  REQUIRE(cudaGetDeviceProperties(&properties, 0) == cudaSuccess);
  REQUIRE(std::string(properties.name) == "simcuda");
}

inline std::string race_report() {
  size_t needed = simcuda_race_report(nullptr, 0);
  std::string text(needed + 1, '\0');
  simcuda_race_report(text.data(), text.size());
  text.resize(needed);
  return text;
}

}  // namespace simcuda_test
