// What every runtime-API source file of simcuda's libcudart.so.13 shares: the export
// macro, the prologue that also records the sticky "last error", and typed access to the
// driver library's own functions.
//
// Note [Runtime on the driver]
// The runtime keeps no device state. Each cuda* function opens with SIMCUDA_RUNTIME_ENTER
// (counted, fault-injected, costed as itself; Note [One prologue]) and is implemented with
// driver functions fetched through simcuda_core_driver_proc, i.e. simcuda's own libcuda
// implementations, never an interposed symbol. Those nested driver calls are not counted.
//
// Note [Error codes]
// cudaError_t and CUresult share their numeric values for every code simcuda's driver
// returns (2 = out of memory, 400 = invalid handle, 600 = not ready, 801 = not supported,
// ...), so a driver result converts to the runtime's by value.
// Invariant: every exported cuda* function returns through `finish`, which keeps the
// thread's last error (cudaGetLastError) current.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <atomic>

#include "../core/core_abi.h"
#include "../core/entry_scope.h"

#define SIMCUDA_EXPORT extern "C" __attribute__((visibility("default")))

namespace simcuda::runtime {

// Keeps the thread's last error (not for cudaErrorNotReady, which is not an error).
cudaError_t finish(cudaError_t result);
inline cudaError_t finish(CUresult result) { return finish(static_cast<cudaError_t>(result)); }
// Makes the current device's primary context current when the thread has none, as the real
// runtime does on its first call.
CUresult ensure_context();
int current_device_ordinal();

template <typename Function>
Function driver_function(const char* name) {
  return reinterpret_cast<Function>(simcuda_core_driver_proc(name, 13000));
}

}  // namespace simcuda::runtime

// The driver library's own implementation of a driver function, typed from cuda.h
// (Note [Runtime on the driver]).
// Note [No guarded statics on entry]: the function is cached in an atomic.
#define SIMCUDA_DRIVER(name)                                                                   \
  (*[] {                                                                                       \
    static std::atomic<decltype(&::name)> simcuda_driver_fn_{nullptr};                         \
    return ::simcuda::cached_lookup(simcuda_driver_fn_, static_cast<decltype(&::name)>(nullptr), \
                                    [] { return ::simcuda::runtime::driver_function<decltype(&::name)>(#name); }); \
  }())

#define SIMCUDA_RUNTIME_ENTER()                    \
  SIMCUDA_ENTRY_SCOPE();                           \
  if (simcuda_entry_scope_.injected_error() != 0) \
  return ::simcuda::runtime::finish(static_cast<cudaError_t>(simcuda_entry_scope_.injected_error()))
