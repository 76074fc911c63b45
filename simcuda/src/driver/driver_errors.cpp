// Driver API: cuGetErrorName / cuGetErrorString over every CUresult of cuda.h.
// Invariant: a code outside the enum answers CUDA_ERROR_INVALID_VALUE with a NULL string.
#include <cstring>

#include "driver_common.h"

namespace {

struct ErrorText {
  CUresult code;
  const char* name;
};

constexpr ErrorText kErrors[] = {
#define SIMCUDA_DRIVER_ERROR(name) {name, #name},
#include "driver_error_names.def"
#undef SIMCUDA_DRIVER_ERROR
};

const char* description(CUresult code) {
  switch (code) {
    case CUDA_SUCCESS: return "no error";
    case CUDA_ERROR_INVALID_VALUE: return "invalid argument";
    case CUDA_ERROR_OUT_OF_MEMORY: return "out of memory";
    case CUDA_ERROR_NOT_INITIALIZED: return "initialization error";
    case CUDA_ERROR_INVALID_DEVICE: return "invalid device ordinal";
    case CUDA_ERROR_INVALID_CONTEXT: return "invalid device context";
    case CUDA_ERROR_ALREADY_MAPPED: return "resource already mapped";
    case CUDA_ERROR_INVALID_HANDLE: return "invalid resource handle";
    case CUDA_ERROR_NOT_FOUND: return "named symbol not found";
    case CUDA_ERROR_NOT_READY: return "device not ready";
    case CUDA_ERROR_ILLEGAL_ADDRESS: return "an illegal memory access was encountered";
    case CUDA_ERROR_NOT_SUPPORTED: return "operation not supported";
    case CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED: return "peer access is already enabled";
    default: return nullptr;
  }
}

const ErrorText* find(CUresult code) {
  for (const ErrorText& error : kErrors)
    if (error.code == code) return &error;
  return nullptr;
}

}  // namespace

SIMCUDA_EXPORT CUresult CUDAAPI cuGetErrorName(CUresult code, const char** name) {
  SIMCUDA_DRIVER_ENTER();
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorText* error = find(code);
  *name = error != nullptr ? error->name : nullptr;
  return error != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuGetErrorString(CUresult code, const char** text) {
  SIMCUDA_DRIVER_ENTER();
  if (text == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorText* error = find(code);
  if (error == nullptr) {
    *text = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
  }
  const char* described = description(code);
  *text = described != nullptr ? described : error->name;
  return CUDA_SUCCESS;
}
