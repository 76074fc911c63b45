// What every driver-API source file of simcuda's libcuda.so.1 shares: the export macro and
// the prologue. Compiled with __CUDA_API_VERSION_INTERNAL (as the real driver is) so that
// cuda.h declares every versioned name literally (cuMemAlloc_v2, and the old cuMemAlloc).
// Invariant: every exported cu* function opens with SIMCUDA_DRIVER_ENTER().
#pragma once

#include <cuda.h>

#include "../core/device_state.h"
#include "../core/entry_scope.h"
#include "../core/pending_work.h"
#include "../core/stream_capture.h"

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

// Note [Stream arguments]
// A driver function that names a stream resolves it with the state lock held: an unknown
// handle is CUDA_ERROR_INVALID_HANDLE, answered before anything about the stream. A function
// that enqueues work on it then applies the legacy-stream capture rule, invalidating a
// capture it breaks (Note [Stream capture]). These run `body(stream)` once both let it and
// return what it returns; the caller holds the state lock.
template <typename Body>
CUresult on_stream_locked(CUstream handle, Body&& body) {
  Stream* stream = resolve_stream_locked(handle);
  if (stream == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  return body(*stream);
}
template <typename Body>
CUresult on_work_stream_locked(CUstream handle, Body&& body) {
  return on_stream_locked(handle, [&body](Stream& stream) -> CUresult {
    if (CUresult refused = check_legacy_stream_use_locked(stream, true); refused != CUDA_SUCCESS) return refused;
    return body(stream);
  });
}

}  // namespace simcuda
