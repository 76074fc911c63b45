// Runtime API: device memory (cudaMalloc/Free, stream-ordered pools), copies, memsets,
// memory info, pointer attributes, IPC handles and host allocations.
// Invariant: device memory calls act on the current device's primary context.
#include <cstring>

#include "runtime_common.h"

using namespace simcuda::runtime;

namespace {

CUdeviceptr device_pointer(const void* pointer) { return reinterpret_cast<CUdeviceptr>(pointer); }

bool valid_kind(cudaMemcpyKind kind) { return kind >= cudaMemcpyHostToHost && kind <= cudaMemcpyDefault; }

}  // namespace

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMalloc(void** pointer, size_t bytes) {
  SIMCUDA_RUNTIME_ENTER();
  if (pointer == nullptr) return finish(cudaErrorInvalidValue);
  CUresult result = ensure_context();
  if (result != CUDA_SUCCESS) return finish(result);
  if (bytes == 0) {  // as the real runtime: success and a null pointer
    *pointer = nullptr;
    return cudaSuccess;
  }
  CUdeviceptr allocated = 0;
  result = SIMCUDA_DRIVER(cuMemAlloc_v2)(&allocated, bytes);
  *pointer = result == CUDA_SUCCESS ? reinterpret_cast<void*>(allocated) : nullptr;
  return finish(result);
}

// Note: cudaFree synchronizes the device as the real one does (cuMemFree_v2 completes all
// pending simulated work of the pointer's device before freeing).
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaFree(void* pointer) {
  SIMCUDA_RUNTIME_ENTER();
  CUresult result = ensure_context();
  if (result != CUDA_SUCCESS || pointer == nullptr) return finish(result);
  return finish(SIMCUDA_DRIVER(cuMemFree_v2)(device_pointer(pointer)));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMallocAsync(void** pointer, size_t bytes, cudaStream_t stream) {
  SIMCUDA_RUNTIME_ENTER();
  if (pointer == nullptr) return finish(cudaErrorInvalidValue);
  CUresult result = ensure_context();
  CUdeviceptr allocated = 0;
  if (result == CUDA_SUCCESS) result = SIMCUDA_DRIVER(cuMemAllocAsync)(&allocated, bytes, stream);
  *pointer = result == CUDA_SUCCESS ? reinterpret_cast<void*>(allocated) : nullptr;
  return finish(result);
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMallocFromPoolAsync(void** pointer, size_t bytes, cudaMemPool_t pool,
                                                            cudaStream_t stream) {
  SIMCUDA_RUNTIME_ENTER();
  if (pointer == nullptr) return finish(cudaErrorInvalidValue);
  CUresult result = ensure_context();
  CUdeviceptr allocated = 0;
  if (result == CUDA_SUCCESS)
    result = SIMCUDA_DRIVER(cuMemAllocFromPoolAsync)(&allocated, bytes, reinterpret_cast<CUmemoryPool>(pool), stream);
  *pointer = result == CUDA_SUCCESS ? reinterpret_cast<void*>(allocated) : nullptr;
  return finish(result);
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaFreeAsync(void* pointer, cudaStream_t stream) {
  SIMCUDA_RUNTIME_ENTER();
  CUresult result = ensure_context();
  if (result != CUDA_SUCCESS || pointer == nullptr) return finish(result);
  return finish(SIMCUDA_DRIVER(cuMemFreeAsync)(device_pointer(pointer), stream));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
  SIMCUDA_RUNTIME_ENTER();
  CUresult result = SIMCUDA_DRIVER(cuDeviceGetDefaultMemPool)(reinterpret_cast<CUmemoryPool*>(pool), device);
  return finish(result == CUDA_ERROR_INVALID_DEVICE ? CUresult(cudaErrorInvalidDevice) : result);
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDeviceGetMemPool(cudaMemPool_t* pool, int device) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuDeviceGetMemPool)(reinterpret_cast<CUmemoryPool*>(pool), device));
}

// cudaMemPoolAttr and CUmemPool_attribute share their values, as do the access descriptors.
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemPoolGetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attribute, void* value) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuMemPoolGetAttribute)(reinterpret_cast<CUmemoryPool>(pool),
                                                     static_cast<CUmemPool_attribute>(attribute), value));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attribute, void* value) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuMemPoolSetAttribute)(reinterpret_cast<CUmemoryPool>(pool),
                                                     static_cast<CUmemPool_attribute>(attribute), value));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemPoolTrimTo(cudaMemPool_t pool, size_t keep_bytes) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuMemPoolTrimTo)(reinterpret_cast<CUmemoryPool>(pool), keep_bytes));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemPoolSetAccess(cudaMemPool_t pool, const cudaMemAccessDesc* descriptors,
                                                         size_t count) {
  SIMCUDA_RUNTIME_ENTER();
  static_assert(sizeof(cudaMemAccessDesc) == sizeof(CUmemAccessDesc));
  return finish(SIMCUDA_DRIVER(cuMemPoolSetAccess)(reinterpret_cast<CUmemoryPool>(pool),
                                                  reinterpret_cast<const CUmemAccessDesc*>(descriptors), count));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  SIMCUDA_RUNTIME_ENTER();
  CUresult result = ensure_context();
  if (result == CUDA_SUCCESS) result = SIMCUDA_DRIVER(cuMemGetInfo_v2)(free_bytes, total_bytes);
  return finish(result);
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpy(void* destination, const void* source, size_t bytes, cudaMemcpyKind kind) {
  SIMCUDA_RUNTIME_ENTER();
  if (!valid_kind(kind)) return finish(cudaErrorInvalidMemcpyDirection);
  CUresult result = ensure_context();
  if (result == CUDA_SUCCESS) result = SIMCUDA_DRIVER(cuMemcpy)(device_pointer(destination), device_pointer(source), bytes);
  return finish(result);
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpyAsync(void* destination, const void* source, size_t bytes,
                                                    cudaMemcpyKind kind, cudaStream_t stream) {
  SIMCUDA_RUNTIME_ENTER();
  if (!valid_kind(kind)) return finish(cudaErrorInvalidMemcpyDirection);
  CUresult result = ensure_context();
  if (result == CUDA_SUCCESS)
    result = SIMCUDA_DRIVER(cuMemcpyAsync)(device_pointer(destination), device_pointer(source), bytes, stream);
  return finish(result);
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpyPeer(void* destination, int, const void* source, int, size_t bytes) {
  SIMCUDA_RUNTIME_ENTER();
  CUresult result = ensure_context();
  if (result == CUDA_SUCCESS) result = SIMCUDA_DRIVER(cuMemcpy)(device_pointer(destination), device_pointer(source), bytes);
  return finish(result);
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpyPeerAsync(void* destination, int, const void* source, int, size_t bytes,
                                                        cudaStream_t stream) {
  SIMCUDA_RUNTIME_ENTER();
  CUresult result = ensure_context();
  if (result == CUDA_SUCCESS)
    result = SIMCUDA_DRIVER(cuMemcpyAsync)(device_pointer(destination), device_pointer(source), bytes, stream);
  return finish(result);
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemset(void* destination, int value, size_t bytes) {
  SIMCUDA_RUNTIME_ENTER();
  CUresult result = ensure_context();
  if (result == CUDA_SUCCESS)
    result = SIMCUDA_DRIVER(cuMemsetD8_v2)(device_pointer(destination), static_cast<unsigned char>(value), bytes);
  return finish(result);
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemsetAsync(void* destination, int value, size_t bytes, cudaStream_t stream) {
  SIMCUDA_RUNTIME_ENTER();
  CUresult result = ensure_context();
  if (result == CUDA_SUCCESS)
    result = SIMCUDA_DRIVER(cuMemsetD8Async)(device_pointer(destination), static_cast<unsigned char>(value), bytes, stream);
  return finish(result);
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* pointer) {
  SIMCUDA_RUNTIME_ENTER();
  if (attributes == nullptr) return finish(cudaErrorInvalidValue);
  std::memset(attributes, 0, sizeof *attributes);
  int device = 0;
  if (SIMCUDA_DRIVER(cuPointerGetAttribute)(&device, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, device_pointer(pointer)) ==
      CUDA_SUCCESS) {
    attributes->type = cudaMemoryTypeDevice;
    attributes->device = device;
    attributes->devicePointer = const_cast<void*>(pointer);
  } else {  // ordinary host memory
    attributes->type = cudaMemoryTypeUnregistered;
    attributes->device = -2;
    attributes->hostPointer = const_cast<void*>(pointer);
  }
  return cudaSuccess;
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaIpcGetMemHandle(cudaIpcMemHandle_t* handle, void* pointer) {
  SIMCUDA_RUNTIME_ENTER();
  static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(CUipcMemHandle));
  return finish(SIMCUDA_DRIVER(cuIpcGetMemHandle)(reinterpret_cast<CUipcMemHandle*>(handle), device_pointer(pointer)));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaIpcGetEventHandle(cudaIpcEventHandle_t* handle, cudaEvent_t event) {
  SIMCUDA_RUNTIME_ENTER();
  static_assert(sizeof(cudaIpcEventHandle_t) == sizeof(CUipcEventHandle));
  return finish(SIMCUDA_DRIVER(cuIpcGetEventHandle)(reinterpret_cast<CUipcEventHandle*>(handle), event));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaIpcOpenEventHandle(cudaEvent_t* event, cudaIpcEventHandle_t handle) {
  SIMCUDA_RUNTIME_ENTER();
  CUipcEventHandle driver_handle;
  std::memcpy(&driver_handle, &handle, sizeof driver_handle);
  return finish(SIMCUDA_DRIVER(cuIpcOpenEventHandle)(event, driver_handle));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaIpcOpenMemHandle(void** pointer, cudaIpcMemHandle_t handle, unsigned int flags) {
  SIMCUDA_RUNTIME_ENTER();
  if (pointer == nullptr) return finish(cudaErrorInvalidValue);
  CUipcMemHandle driver_handle;
  std::memcpy(&driver_handle, &handle, sizeof driver_handle);
  CUdeviceptr opened = 0;
  CUresult result = SIMCUDA_DRIVER(cuIpcOpenMemHandle_v2)(&opened, driver_handle, flags);
  *pointer = result == CUDA_SUCCESS ? reinterpret_cast<void*>(opened) : nullptr;
  return finish(result);
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaIpcCloseMemHandle(void* pointer) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuIpcCloseMemHandle)(device_pointer(pointer)));
}

// Pinned host memory is ordinary page-aligned host memory (the driver's cuMemHostAlloc).

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaHostAlloc(void** pointer, size_t bytes, unsigned int flags) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuMemHostAlloc)(pointer, bytes, flags));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMallocHost(void** pointer, size_t bytes) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuMemAllocHost_v2)(pointer, bytes));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaFreeHost(void* pointer) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuMemFreeHost)(pointer));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaHostRegister(void* pointer, size_t bytes, unsigned int flags) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuMemHostRegister_v2)(pointer, bytes, flags));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaHostUnregister(void* pointer) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuMemHostUnregister)(pointer));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaHostGetDevicePointer(void** device, void* host, unsigned int) {
  SIMCUDA_RUNTIME_ENTER();
  if (device == nullptr) return finish(cudaErrorInvalidValue);
  *device = host;
  return cudaSuccess;
}
