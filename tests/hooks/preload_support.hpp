// Helpers for tests that run under LD_PRELOAD=libfragless_preload.so: reach fragless's C
// API through the preloaded library (the test does not link libfragless) and check that the
// process really runs with the interposer and simcuda.
#pragma once

#include <dlfcn.h>

#include <cstdint>
#include <stdexcept>

#include "fragless/fragless.h"

namespace preload_test {

template <typename Function>
Function preloaded(const char* name) {
  void* symbol = dlsym(RTLD_DEFAULT, name);
  if (symbol == nullptr) throw std::runtime_error(std::string("not preloaded: ") + name);
  return reinterpret_cast<Function>(symbol);
}

inline fragless_memory_figures figures(int device = 0) {
  fragless_memory_figures result{};
  auto get = preloaded<fragless_status (*)(int, fragless_memory_figures*)>("fragless_get_memory_figures");
  if (get(device, &result) != FRAGLESS_OK) throw std::runtime_error("fragless_get_memory_figures failed");
  return result;
}

}  // namespace preload_test
