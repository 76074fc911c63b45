// Runtime API: the sticky last error and error names/strings over every cudaError_t.
// Invariant: cudaGetLastError returns the last error of this thread and resets it.
#include <cstring>

#include "runtime_common.h"

// Note [Error codes] relies on these pairs sharing their values.
static_assert(int(CUDA_ERROR_INVALID_VALUE) == int(cudaErrorInvalidValue));
static_assert(int(CUDA_ERROR_OUT_OF_MEMORY) == int(cudaErrorMemoryAllocation));
static_assert(int(CUDA_ERROR_NOT_INITIALIZED) == int(cudaErrorInitializationError));
static_assert(int(CUDA_ERROR_INVALID_DEVICE) == int(cudaErrorInvalidDevice));
static_assert(int(CUDA_ERROR_INVALID_CONTEXT) == int(cudaErrorDeviceUninitialized));
static_assert(int(CUDA_ERROR_ALREADY_MAPPED) == int(cudaErrorAlreadyMapped));
static_assert(int(CUDA_ERROR_INVALID_HANDLE) == int(cudaErrorInvalidResourceHandle));
static_assert(int(CUDA_ERROR_NOT_FOUND) == int(cudaErrorSymbolNotFound));
static_assert(int(CUDA_ERROR_NOT_READY) == int(cudaErrorNotReady));
static_assert(int(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) == int(cudaErrorPeerAccessAlreadyEnabled));
static_assert(int(CUDA_ERROR_NOT_SUPPORTED) == int(cudaErrorNotSupported));

namespace {

thread_local cudaError_t t_last_error = cudaSuccess;

struct ErrorText {
  cudaError_t code;
  const char* name;
};

constexpr ErrorText kErrors[] = {
#define SIMCUDA_RUNTIME_ERROR(name) {name, #name},
#include "runtime_error_names.def"
#undef SIMCUDA_RUNTIME_ERROR
};

const char* description(cudaError_t code) {
  switch (code) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorNotSupported: return "operation not supported";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorPeerAccessAlreadyEnabled: return "peer access is already enabled";
    case cudaErrorSymbolNotFound: return "named symbol not found";
    case cudaErrorAlreadyMapped: return "resource already mapped";
    default: return nullptr;
  }
}

const ErrorText* find(cudaError_t code) {
  for (const ErrorText& error : kErrors)
    if (error.code == code) return &error;
  return nullptr;
}

}  // namespace

namespace simcuda::runtime {

cudaError_t finish(cudaError_t result) {
  if (result != cudaSuccess && result != cudaErrorNotReady) t_last_error = result;
  return result;
}

}  // namespace simcuda::runtime

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGetLastError(void) {
  SIMCUDA_RUNTIME_ENTER();
  cudaError_t last = t_last_error;
  t_last_error = cudaSuccess;
  return last;
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaPeekAtLastError(void) {
  SIMCUDA_RUNTIME_ENTER();
  return t_last_error;
}

SIMCUDA_EXPORT const char* CUDARTAPI cudaGetErrorName(cudaError_t code) {
  static_cast<void>(simcuda_core_enter(simcuda_core_name_index(__func__)));
  simcuda_core_leave();
  const ErrorText* error = find(code);
  return error != nullptr ? error->name : "cudaErrorUnknown";
}

SIMCUDA_EXPORT const char* CUDARTAPI cudaGetErrorString(cudaError_t code) {
  static_cast<void>(simcuda_core_enter(simcuda_core_name_index(__func__)));
  simcuda_core_leave();
  const ErrorText* error = find(code);
  if (error == nullptr) return "unrecognized error code";
  const char* described = description(code);
  return described != nullptr ? described : error->name;
}

namespace simcuda::runtime {

// For runtime_stubs.cpp, which cannot include the CUDA headers.
int record_unsupported_error(int code) { return static_cast<int>(finish(static_cast<cudaError_t>(code))); }

}  // namespace simcuda::runtime
