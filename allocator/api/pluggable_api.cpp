// The optional functions of PyTorch's CUDAPluggableAllocator, with the exact signatures
// torch::cuda::CUDAPluggableAllocator's set_*_fn setters take (void results: PyTorch has no
// way to receive an error from them, so failures are logged and kept in
// fragless_last_error()). Never throws.
#include <string>

#include "core/log.hpp"
#include "fragless/fragless.h"
#include "fragless/fragless.hpp"

namespace {

void report(const char* what) noexcept {
  try {
    fragless::core::log_message(fragless::core::log_level::warn, std::string(what) + ": " + fragless_last_error());
  } catch (...) {
  }
}

}  // namespace

extern "C" {

void fragless_pluggable_init(int device_count) {
  // fragless creates each device's state on first use; nothing has to happen up front.
  (void)device_count;
}

void fragless_pluggable_reset(void) {
  if (fragless_empty_cache(-1, nullptr) != FRAGLESS_OK) report("fragless_pluggable_reset");
}

void fragless_pluggable_set_memory_fraction(double fraction, int device) {
  if (fragless_set_memory_fraction(fraction, device) != FRAGLESS_OK) report("fragless_pluggable_set_memory_fraction");
}

void fragless_pluggable_record_stream(void* ptr, fragless_stream_t stream) {
  if (fragless_record_stream(ptr, stream) != FRAGLESS_OK) report("fragless_pluggable_record_stream");
}

void* fragless_pluggable_base_alloc(void* ptr, size_t* size) {
  void* base = nullptr;
  size_t base_size = 0;
  if (fragless_base_allocation(ptr, &base, &base_size) != FRAGLESS_OK) {
    report("fragless_pluggable_base_alloc");
    return nullptr;
  }
  if (size != nullptr) *size = base_size;
  return base;
}

}  // extern "C"
