// Every other libcudart.so.13 export, as a weak stub: counted by the prologue, logged once,
// answering cudaErrorNotSupported (801) and setting the thread's last error. Implemented
// functions elsewhere in this library are strong definitions and replace their stub.
// Invariant: this file includes no CUDA header (the stubs' signatures are deliberately vague).
#include "../core/core_abi.h"

namespace simcuda::runtime {
int record_unsupported_error(int code);
}

namespace {

constexpr int kNotSupported = 801;  // cudaErrorNotSupported

int unsupported(const char* name) {
  int injected = simcuda_core_enter(simcuda_core_name_index(name));
  simcuda_core_leave();
  simcuda_core_log_unsupported(name);
  return simcuda::runtime::record_unsupported_error(injected != 0 ? injected : kNotSupported);
}

}  // namespace

#define SIMCUDA_RUNTIME_EXPORT(name) \
  extern "C" __attribute__((weak, visibility("default"))) int name(...) { return unsupported(#name); }
#include "runtime_exports.def"
#undef SIMCUDA_RUNTIME_EXPORT
