// Runtime API: versions, devices, properties, attributes, peers, device synchronization.
// Invariant: the current device is the driver's current primary context (one per thread).
#include <cstdio>
#include <cstring>

#include "runtime_common.h"

using namespace simcuda::runtime;

namespace simcuda::runtime {

CUresult ensure_context() {
  CUcontext current = nullptr;
  CUresult result = SIMCUDA_DRIVER(cuCtxGetCurrent)(&current);
  if (result != CUDA_SUCCESS || current != nullptr) return result;
  result = SIMCUDA_DRIVER(cuDevicePrimaryCtxRetain)(&current, 0);
  if (result != CUDA_SUCCESS) return result;
  return SIMCUDA_DRIVER(cuCtxSetCurrent)(current);
}

int current_device_ordinal() {
  CUdevice device = 0;
  if (SIMCUDA_DRIVER(cuCtxGetDevice)(&device) != CUDA_SUCCESS) return 0;
  return device;
}

}  // namespace simcuda::runtime

namespace {

// Whether `device` is an ordinal the driver counts (else cudaErrorInvalidDevice).
bool valid_device(int device) {
  int count = 0;
  SIMCUDA_DRIVER(cuDeviceGetCount)(&count);
  return device >= 0 && device < count;
}

}  // namespace

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaRuntimeGetVersion(int* version) {
  SIMCUDA_RUNTIME_ENTER();
  if (version == nullptr) return finish(cudaErrorInvalidValue);
  *version = 13000;
  return cudaSuccess;
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDriverGetVersion(int* version) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuDriverGetVersion)(version));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGetDeviceCount(int* count) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuDeviceGetCount)(count));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGetDevice(int* device) {
  SIMCUDA_RUNTIME_ENTER();
  if (device == nullptr) return finish(cudaErrorInvalidValue);
  *device = current_device_ordinal();
  return cudaSuccess;
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaSetDevice(int device) {
  SIMCUDA_RUNTIME_ENTER();
  if (!valid_device(device)) return finish(cudaErrorInvalidDevice);
  CUcontext context = nullptr;
  CUresult result = SIMCUDA_DRIVER(cuDevicePrimaryCtxRetain)(&context, device);
  if (result == CUDA_SUCCESS) SIMCUDA_DRIVER(cuDevicePrimaryCtxRelease_v2)(device);  // keep no extra reference
  if (result == CUDA_SUCCESS) result = SIMCUDA_DRIVER(cuCtxSetCurrent)(context);
  return finish(result);
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaInitDevice(int device, unsigned int, unsigned int) {
  SIMCUDA_RUNTIME_ENTER();
  CUcontext context = nullptr;
  CUresult result = SIMCUDA_DRIVER(cuDevicePrimaryCtxRetain)(&context, device);
  return finish(result == CUDA_ERROR_INVALID_DEVICE ? CUresult(cudaErrorInvalidDevice) : result);
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaSetDeviceFlags(unsigned int flags) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuDevicePrimaryCtxSetFlags_v2)(current_device_ordinal(), flags));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGetDeviceFlags(unsigned int* flags) {
  SIMCUDA_RUNTIME_ENTER();
  int active = 0;
  return finish(SIMCUDA_DRIVER(cuDevicePrimaryCtxGetState)(current_device_ordinal(), flags, &active));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device) {
  SIMCUDA_RUNTIME_ENTER();
  // cudaDeviceAttr and CUdevice_attribute share their values.
  return finish(SIMCUDA_DRIVER(cuDeviceGetAttribute)(value, static_cast<CUdevice_attribute>(attribute), device));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGetDeviceProperties(cudaDeviceProp* properties, int device) {
  SIMCUDA_RUNTIME_ENTER();
  if (properties == nullptr) return finish(cudaErrorInvalidValue);
  if (!valid_device(device)) return finish(cudaErrorInvalidDevice);
  std::memset(properties, 0, sizeof *properties);
  auto attribute = [device](CUdevice_attribute which) {
    int value = 0;
    SIMCUDA_DRIVER(cuDeviceGetAttribute)(&value, which, device);
    return value;
  };
  SIMCUDA_DRIVER(cuDeviceGetName)(properties->name, static_cast<int>(sizeof properties->name), device);
  SIMCUDA_DRIVER(cuDeviceGetUuid_v2)(reinterpret_cast<CUuuid*>(&properties->uuid), device);
  SIMCUDA_DRIVER(cuDeviceTotalMem_v2)(&properties->totalGlobalMem, device);
  properties->sharedMemPerBlock = static_cast<size_t>(attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK));
  properties->regsPerBlock = attribute(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
  properties->warpSize = attribute(CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  properties->memPitch = static_cast<size_t>(attribute(CU_DEVICE_ATTRIBUTE_MAX_PITCH));
  properties->maxThreadsPerBlock = attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  properties->maxThreadsDim[0] = attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X);
  properties->maxThreadsDim[1] = attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y);
  properties->maxThreadsDim[2] = attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z);
  properties->maxGridSize[0] = attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
  properties->maxGridSize[1] = attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y);
  properties->maxGridSize[2] = attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z);
  properties->totalConstMem = static_cast<size_t>(attribute(CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY));
  properties->major = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  properties->minor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  properties->textureAlignment = static_cast<size_t>(attribute(CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT));
  properties->multiProcessorCount = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  properties->canMapHostMemory = attribute(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY);
  properties->concurrentKernels = attribute(CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS);
  properties->pciBusID = device;
  properties->asyncEngineCount = attribute(CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT);
  properties->unifiedAddressing = attribute(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING);
  properties->memoryBusWidth = attribute(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
  properties->l2CacheSize = attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  properties->maxThreadsPerMultiProcessor = attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
  properties->streamPrioritiesSupported = attribute(CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED);
  properties->globalL1CacheSupported = attribute(CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED);
  properties->localL1CacheSupported = attribute(CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED);
  properties->sharedMemPerMultiprocessor =
      static_cast<size_t>(attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR));
  properties->regsPerMultiprocessor = attribute(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
  properties->sharedMemPerBlockOptin =
      static_cast<size_t>(attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN));
  properties->maxBlocksPerMultiProcessor = attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR);
  properties->memoryPoolsSupported = attribute(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED);
  properties->memoryPoolSupportedHandleTypes =
      static_cast<unsigned>(attribute(CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES));
  return cudaSuccess;
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuCtxGetStreamPriorityRange)(least, greatest));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDeviceSynchronize(void) {
  SIMCUDA_RUNTIME_ENTER();
  CUresult result = ensure_context();
  if (result == CUDA_SUCCESS) result = SIMCUDA_DRIVER(cuCtxSynchronize)();
  return finish(result);
}

// Completes the device's work; simcuda keeps memory (resetting state is not emulated).
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDeviceReset(void) {
  SIMCUDA_RUNTIME_ENTER();
  CUresult result = ensure_context();
  if (result == CUDA_SUCCESS) result = SIMCUDA_DRIVER(cuCtxSynchronize)();
  return finish(result);
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDeviceCanAccessPeer(int* can_access, int device, int peer) {
  SIMCUDA_RUNTIME_ENTER();
  CUresult result = SIMCUDA_DRIVER(cuDeviceCanAccessPeer)(can_access, device, peer);
  return finish(result == CUDA_ERROR_INVALID_DEVICE ? CUresult(cudaErrorInvalidDevice) : result);
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
  SIMCUDA_RUNTIME_ENTER();
  CUresult result = ensure_context();
  CUcontext peer_context = nullptr;
  if (result == CUDA_SUCCESS) result = SIMCUDA_DRIVER(cuDevicePrimaryCtxRetain)(&peer_context, peer);
  if (result == CUDA_SUCCESS) result = SIMCUDA_DRIVER(cuCtxEnablePeerAccess)(peer_context, flags);
  return finish(result);
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDeviceGetPCIBusId(char* bus_id, int length, int device) {
  SIMCUDA_RUNTIME_ENTER();
  if (bus_id == nullptr || length <= 0) return finish(cudaErrorInvalidValue);
  std::snprintf(bus_id, static_cast<size_t>(length), "0000:%02x:00.0", device);
  return cudaSuccess;
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDeviceGetLimit(size_t* value, cudaLimit limit) {
  SIMCUDA_RUNTIME_ENTER();
  if (value == nullptr) return finish(cudaErrorInvalidValue);
  switch (limit) {
    case cudaLimitStackSize: *value = 1024; return cudaSuccess;
    case cudaLimitPrintfFifoSize: *value = size_t{1} << 20; return cudaSuccess;
    case cudaLimitMallocHeapSize: *value = size_t{8} << 20; return cudaSuccess;
    default: *value = 0; return cudaSuccess;
  }
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDeviceSetLimit(cudaLimit, size_t) {
  SIMCUDA_RUNTIME_ENTER();
  return cudaSuccess;
}

// Graph memory nodes are not emulated (Note [Stream capture]), so its attributes read 0.
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDeviceGetGraphMemAttribute(int device, cudaGraphMemAttributeType, void* value) {
  SIMCUDA_RUNTIME_ENTER();
  if (!valid_device(device)) return finish(cudaErrorInvalidDevice);
  if (value == nullptr) return finish(cudaErrorInvalidValue);
  *static_cast<unsigned long long*>(value) = 0;
  return cudaSuccess;
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDeviceSetGraphMemAttribute(int device, cudaGraphMemAttributeType, void* value) {
  SIMCUDA_RUNTIME_ENTER();
  if (!valid_device(device)) return finish(cudaErrorInvalidDevice);
  return value == nullptr ? finish(cudaErrorInvalidValue) : cudaSuccess;
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaDeviceGraphMemTrim(int) {
  SIMCUDA_RUNTIME_ENTER();
  return cudaSuccess;
}
