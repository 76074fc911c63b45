// What every driver-API source file of simcuda's libcuda.so.1 shares: the export macro and
// the prologue. Compiled with __CUDA_API_VERSION_INTERNAL (as the real driver is) so that
// cuda.h declares every versioned name literally (cuMemAlloc_v2, and the old cuMemAlloc).
// Invariant: every exported cu* function opens with SIMCUDA_DRIVER_ENTER().
#pragma once

#include <cuda.h>

#include "../core/device_state.h"
#include "../core/entry_scope.h"

#define SIMCUDA_EXPORT extern "C" __attribute__((visibility("default")))
#define SIMCUDA_DRIVER_ENTER() SIMCUDA_ENTER(CUresult)

namespace simcuda {

inline CUstream to_handle(Stream* stream) { return reinterpret_cast<CUstream>(stream); }
inline CUevent to_handle(Event* event) { return reinterpret_cast<CUevent>(event); }
inline CUcontext to_handle(PrimaryContext* context) { return reinterpret_cast<CUcontext>(context); }
inline uintptr_t to_address(CUdeviceptr pointer) { return static_cast<uintptr_t>(pointer); }

// The device the current context belongs to (device 0 when none was made current:
// simcuda is lenient where the real driver answers CUDA_ERROR_INVALID_CONTEXT).
inline int context_device() { return current_device(); }

}  // namespace simcuda
