// Every other libcuda.so.1 export, as a weak stub: counted by the prologue, logged once,
// answering CUDA_ERROR_NOT_SUPPORTED (801). The implemented functions elsewhere in this
// library are strong definitions and replace their stub at link time.
// Invariant: this file includes no CUDA header (the stubs' signatures are deliberately vague).
#include "../core/core_abi.h"

namespace {

constexpr int kNotSupported = 801;  // CUDA_ERROR_NOT_SUPPORTED

int unsupported(const char* name) {
  int injected = simcuda_core_enter(simcuda_core_name_index(name));
  simcuda_core_leave();
  simcuda_core_log_unsupported(name);
  return injected != 0 ? injected : kNotSupported;
}

}  // namespace

#define SIMCUDA_DRIVER_EXPORT(name) \
  extern "C" __attribute__((weak, visibility("default"))) int name(...) { return unsupported(#name); }
#include "driver_exports.def"
#undef SIMCUDA_DRIVER_EXPORT
