// Driver API: cuMemAlloc/cuMemFree, info, copies, memsets, pointer queries.
// Invariant: every device access goes through device_copies (so the race oracle sees it).
#include <cstdlib>
#include <cstring>

#include "../core/device_copies.h"
#include "../core/device_memory.h"
#include "driver_common.h"

using namespace simcuda;

namespace {

// Synchronous copies and memsets run on the legacy stream and complete it through the op.
// Note [Stream capture]: they are unsafe calls, and uses of the legacy stream.
CUresult copy_sync(CUdeviceptr destination, CUdeviceptr source, size_t bytes, const char* what) {
  auto lock = lock_state();
  if (CUresult refused = check_unsafe_call_locked(); refused != CUDA_SUCCESS) return refused;
  Stream* stream = resolve_stream_locked(nullptr);
  if (stream == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (CUresult refused = check_legacy_stream_use_locked(*stream, true); refused != CUDA_SUCCESS) return refused;
  CUresult result = enqueue_copy_locked(*stream, to_address(destination), to_address(source), bytes, what);
  complete_through_locked(*stream, stream->launched);
  return result;
}

CUresult copy_async(CUdeviceptr destination, CUdeviceptr source, size_t bytes, CUstream handle, const char* what) {
  auto lock = lock_state();
  return on_work_stream_locked(handle, [&](Stream& stream) {
    return enqueue_copy_locked(stream, to_address(destination), to_address(source), bytes, what);
  });
}

CUresult fill(CUdeviceptr destination, uint32_t pattern, size_t pattern_bytes, size_t count, CUstream handle,
              bool synchronous) {
  auto lock = lock_state();
  if (synchronous) {
    if (CUresult refused = check_unsafe_call_locked(); refused != CUDA_SUCCESS) return refused;
  }
  return on_work_stream_locked(handle, [&](Stream& stream) {
    CUresult result = enqueue_fill_locked(stream, to_address(destination), pattern, pattern_bytes, count, "memset");
    if (synchronous) complete_through_locked(stream, stream.launched);
    return result;
  });
}

}  // namespace

SIMCUDA_EXPORT CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr* pointer, size_t bytes) {
  SIMCUDA_DRIVER_ENTER();
  if (pointer == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  if (CUresult refused = check_unsafe_call_locked(); refused != CUDA_SUCCESS) return refused;  // Note [Stream capture]
  void* allocated = nullptr;
  CUresult result = device_malloc_locked(context_device(), bytes, false, &allocated);
  if (result == CUDA_SUCCESS) *pointer = reinterpret_cast<CUdeviceptr>(allocated);
  return result;
}

// Note: like cudaFree, this synchronizes the device first (completes all its pending work).
SIMCUDA_EXPORT CUresult CUDAAPI cuMemFree_v2(CUdeviceptr pointer) {
  SIMCUDA_DRIVER_ENTER();
  if (pointer == 0) return CUDA_SUCCESS;
  auto lock = lock_state();
  if (CUresult refused = check_unsafe_call_locked(); refused != CUDA_SUCCESS) return refused;  // Note [Stream capture]
  Region* region = find_region_locked(to_address(pointer));
  if (region == nullptr || region->begin != to_address(pointer) || region->kind != RegionKind::malloc)
    return CUDA_ERROR_INVALID_VALUE;
  complete_device_locked(region->device);
  return device_free_locked(reinterpret_cast<void*>(pointer));
}

// Pinned host memory is ordinary page-aligned host memory; allocating, freeing and
// registering it are unsafe calls during a capture (Note [Stream capture]).
namespace {

CUresult host_alloc(void** pointer, size_t bytes) {
  if (pointer == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pointer = nullptr;
  auto lock = lock_state();
  if (CUresult refused = check_unsafe_call_locked(); refused != CUDA_SUCCESS) return refused;
  if (bytes == 0) return CUDA_SUCCESS;
  return posix_memalign(pointer, kPageBytes, bytes) == 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult host_unsafe_call() {
  auto lock = lock_state();
  return check_unsafe_call_locked();
}

}  // namespace

SIMCUDA_EXPORT CUresult CUDAAPI cuMemAllocHost_v2(void** pointer, size_t bytes) {
  SIMCUDA_DRIVER_ENTER();
  return host_alloc(pointer, bytes);
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemHostAlloc(void** pointer, size_t bytes, unsigned int) {
  SIMCUDA_DRIVER_ENTER();
  return host_alloc(pointer, bytes);
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemFreeHost(void* pointer) {
  SIMCUDA_DRIVER_ENTER();
  if (CUresult refused = host_unsafe_call(); refused != CUDA_SUCCESS) return refused;
  std::free(pointer);
  return CUDA_SUCCESS;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemHostRegister_v2(void*, size_t, unsigned int) {
  SIMCUDA_DRIVER_ENTER();
  return host_unsafe_call();
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemHostUnregister(void*) {
  SIMCUDA_DRIVER_ENTER();
  return host_unsafe_call();
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  SIMCUDA_DRIVER_ENTER();
  if (free_bytes == nullptr || total_bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  const Device& device = state().devices[static_cast<size_t>(context_device())];
  *total_bytes = static_cast<size_t>(device.capacity_bytes);
  *free_bytes = device.used_bytes >= device.capacity_bytes ? 0 : static_cast<size_t>(device.capacity_bytes - device.used_bytes);
  return CUDA_SUCCESS;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* bytes, CUdeviceptr pointer) {
  SIMCUDA_DRIVER_ENTER();
  auto lock = lock_state();
  Region* region = find_region_locked(to_address(pointer));
  if (region == nullptr) return CUDA_ERROR_NOT_FOUND;
  if (base != nullptr) *base = static_cast<CUdeviceptr>(region->begin);
  if (bytes != nullptr) *bytes = region->bytes;
  return CUDA_SUCCESS;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr pointer) {
  SIMCUDA_DRIVER_ENTER();
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  Region* region = find_region_locked(to_address(pointer));
  if (region == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *static_cast<CUcontext*>(data) = to_handle(&primary_context_locked(region->device));
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned int*>(data) = CU_MEMORYTYPE_DEVICE;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      *static_cast<CUdeviceptr*>(data) = pointer;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      return CUDA_ERROR_INVALID_VALUE;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      *static_cast<int*>(data) = 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *static_cast<int*>(data) = region->device;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *static_cast<CUdeviceptr*>(data) = static_cast<CUdeviceptr>(region->begin);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *static_cast<size_t*>(data) = region->bytes;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
      *static_cast<int*>(data) = 1;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_NOT_SUPPORTED;
  }
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemcpy(CUdeviceptr destination, CUdeviceptr source, size_t bytes) {
  SIMCUDA_DRIVER_ENTER();
  return copy_sync(destination, source, bytes, "memcpy");
}
SIMCUDA_EXPORT CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr destination, const void* source, size_t bytes) {
  SIMCUDA_DRIVER_ENTER();
  return copy_sync(destination, reinterpret_cast<CUdeviceptr>(source), bytes, "memcpy");
}
SIMCUDA_EXPORT CUresult CUDAAPI cuMemcpyDtoH_v2(void* destination, CUdeviceptr source, size_t bytes) {
  SIMCUDA_DRIVER_ENTER();
  return copy_sync(reinterpret_cast<CUdeviceptr>(destination), source, bytes, "memcpy");
}
SIMCUDA_EXPORT CUresult CUDAAPI cuMemcpyDtoD_v2(CUdeviceptr destination, CUdeviceptr source, size_t bytes) {
  SIMCUDA_DRIVER_ENTER();
  return copy_sync(destination, source, bytes, "memcpy");
}
SIMCUDA_EXPORT CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr destination, CUdeviceptr source, size_t bytes, CUstream stream) {
  SIMCUDA_DRIVER_ENTER();
  return copy_async(destination, source, bytes, stream, "memcpyAsync");
}
SIMCUDA_EXPORT CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr destination, const void* source, size_t bytes,
                                                     CUstream stream) {
  SIMCUDA_DRIVER_ENTER();
  return copy_async(destination, reinterpret_cast<CUdeviceptr>(source), bytes, stream, "memcpyAsync");
}
SIMCUDA_EXPORT CUresult CUDAAPI cuMemcpyDtoHAsync_v2(void* destination, CUdeviceptr source, size_t bytes,
                                                     CUstream stream) {
  SIMCUDA_DRIVER_ENTER();
  return copy_async(reinterpret_cast<CUdeviceptr>(destination), source, bytes, stream, "memcpyAsync");
}
SIMCUDA_EXPORT CUresult CUDAAPI cuMemcpyDtoDAsync_v2(CUdeviceptr destination, CUdeviceptr source, size_t bytes,
                                                     CUstream stream) {
  SIMCUDA_DRIVER_ENTER();
  return copy_async(destination, source, bytes, stream, "memcpyAsync");
}
SIMCUDA_EXPORT CUresult CUDAAPI cuMemcpyPeer(CUdeviceptr destination, CUcontext, CUdeviceptr source, CUcontext,
                                             size_t bytes) {
  SIMCUDA_DRIVER_ENTER();
  return copy_sync(destination, source, bytes, "memcpyPeer");
}
SIMCUDA_EXPORT CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr destination, CUcontext, CUdeviceptr source, CUcontext,
                                                  size_t bytes, CUstream stream) {
  SIMCUDA_DRIVER_ENTER();
  return copy_async(destination, source, bytes, stream, "memcpyPeerAsync");
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemsetD8_v2(CUdeviceptr destination, unsigned char value, size_t count) {
  SIMCUDA_DRIVER_ENTER();
  return fill(destination, value, 1, count, nullptr, true);
}
SIMCUDA_EXPORT CUresult CUDAAPI cuMemsetD16_v2(CUdeviceptr destination, unsigned short value, size_t count) {
  SIMCUDA_DRIVER_ENTER();
  return fill(destination, value, 2, count, nullptr, true);
}
SIMCUDA_EXPORT CUresult CUDAAPI cuMemsetD32_v2(CUdeviceptr destination, unsigned int value, size_t count) {
  SIMCUDA_DRIVER_ENTER();
  return fill(destination, value, 4, count, nullptr, true);
}
SIMCUDA_EXPORT CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr destination, unsigned char value, size_t count,
                                                CUstream stream) {
  SIMCUDA_DRIVER_ENTER();
  return fill(destination, value, 1, count, stream, false);
}
SIMCUDA_EXPORT CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr destination, unsigned short value, size_t count,
                                                 CUstream stream) {
  SIMCUDA_DRIVER_ENTER();
  return fill(destination, value, 2, count, stream, false);
}
SIMCUDA_EXPORT CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr destination, unsigned int value, size_t count,
                                                 CUstream stream) {
  SIMCUDA_DRIVER_ENTER();
  return fill(destination, value, 4, count, stream, false);
}

SIMCUDA_EXPORT CUresult CUDAAPI cuStreamWriteValue32_v2(CUstream stream, CUdeviceptr address, cuuint32_t value,
                                                        unsigned int) {
  SIMCUDA_DRIVER_ENTER();
  return fill(address, value, 4, 1, stream, false);
}
