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

// The stubs live in their own section so that cuGetProcAddress can tell them from
// implementations (Note [Proc address versions]).
#define SIMCUDA_DRIVER_EXPORT(name)                                                       \
  extern "C" __attribute__((weak, visibility("default"), section("simcuda_driver_stubs"))) \
  int name(...) {                                                                         \
    return unsupported(#name);                                                            \
  }
#include "driver_exports.def"
#undef SIMCUDA_DRIVER_EXPORT

extern "C" char __start_simcuda_driver_stubs[];
extern "C" char __stop_simcuda_driver_stubs[];

namespace simcuda {

bool is_driver_stub(const void* function) {
  auto address = reinterpret_cast<const char*>(function);
  return address >= __start_simcuda_driver_stubs && address < __stop_simcuda_driver_stubs;
}

}  // namespace simcuda
