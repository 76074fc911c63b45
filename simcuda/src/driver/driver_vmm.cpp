// Driver API: the virtual memory management set (Note [VMM on memfd]).
// Invariant: these are thin forwarders to core/virtual_memory with the state lock held.
#include "../core/device_memory.h"
#include "../core/virtual_memory.h"
#include "driver_common.h"
#include "../core/stream_capture.h"

using namespace simcuda;

SIMCUDA_EXPORT CUresult CUDAAPI cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* properties,
                                                              CUmemAllocationGranularity_flags) {
  SIMCUDA_DRIVER_ENTER();
  if (granularity == nullptr || properties == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *granularity = kVmmGranularityBytes;
  return CUDA_SUCCESS;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr* pointer, size_t bytes, size_t alignment,
                                                    CUdeviceptr hint, unsigned long long flags) {
  SIMCUDA_DRIVER_ENTER();
  if (pointer == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  if (CUresult refused = check_unsafe_call_locked(); refused != CUDA_SUCCESS) return refused;  // Note [Stream capture]
  uintptr_t begin = 0;
  CUresult result = reserve_address_locked(&begin, bytes, alignment, to_address(hint));
  if (result == CUDA_SUCCESS) *pointer = static_cast<CUdeviceptr>(begin);
  return result;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemAddressFree(CUdeviceptr pointer, size_t bytes) {
  SIMCUDA_DRIVER_ENTER();
  auto lock = lock_state();
  if (CUresult refused = check_unsafe_call_locked(); refused != CUDA_SUCCESS) return refused;  // Note [Stream capture]
  return free_address_locked(to_address(pointer), bytes);
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle* handle, size_t bytes,
                                            const CUmemAllocationProp* properties, unsigned long long flags) {
  SIMCUDA_DRIVER_ENTER();
  if (handle == nullptr || properties == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  if (CUresult refused = check_unsafe_call_locked(); refused != CUDA_SUCCESS) return refused;  // Note [Stream capture]
  uint64_t id = 0;
  CUresult result = create_handle_locked(&id, bytes, *properties);
  if (result == CUDA_SUCCESS) *handle = id;
  return result;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle) {
  SIMCUDA_DRIVER_ENTER();
  auto lock = lock_state();
  if (CUresult refused = check_unsafe_call_locked(); refused != CUDA_SUCCESS) return refused;  // Note [Stream capture]
  return release_handle_locked(handle);
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemMap(CUdeviceptr pointer, size_t bytes, size_t offset,
                                         CUmemGenericAllocationHandle handle, unsigned long long flags) {
  SIMCUDA_DRIVER_ENTER();
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  if (CUresult refused = check_unsafe_call_locked(); refused != CUDA_SUCCESS) return refused;  // Note [Stream capture]
  return map_locked(to_address(pointer), bytes, offset, handle);
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemUnmap(CUdeviceptr pointer, size_t bytes) {
  SIMCUDA_DRIVER_ENTER();
  auto lock = lock_state();
  if (CUresult refused = check_unsafe_call_locked(); refused != CUDA_SUCCESS) return refused;  // Note [Stream capture]
  return unmap_locked(to_address(pointer), bytes);
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemSetAccess(CUdeviceptr pointer, size_t bytes, const CUmemAccessDesc* descriptors,
                                               size_t count) {
  SIMCUDA_DRIVER_ENTER();
  if (descriptors == nullptr || count == 0) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  if (CUresult refused = check_unsafe_call_locked(); refused != CUDA_SUCCESS) return refused;  // Note [Stream capture]
  bool read_write = false;
  for (size_t index = 0; index < count; ++index) {
    const CUmemAccessDesc& descriptor = descriptors[index];
    if (descriptor.location.type != CU_MEM_LOCATION_TYPE_DEVICE || !valid_device_locked(descriptor.location.id))
      return CUDA_ERROR_INVALID_DEVICE;
    if (descriptor.flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE || descriptor.flags == CU_MEM_ACCESS_FLAGS_PROT_READ)
      read_write = true;  // host memory cannot be read-only for one device and writable for another
  }
  return set_access_locked(to_address(pointer), bytes, read_write);
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemGetAccess(unsigned long long* flags, const CUmemLocation* location,
                                               CUdeviceptr pointer) {
  SIMCUDA_DRIVER_ENTER();
  if (flags == nullptr || location == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  Region* region = find_region_locked(to_address(pointer));
  if (region == nullptr || region->kind != RegionKind::vmm_mapping) return CUDA_ERROR_INVALID_VALUE;
  *flags = region->accessible ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_NONE;
  return CUDA_SUCCESS;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* address) {
  SIMCUDA_DRIVER_ENTER();
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  uint64_t id = 0;
  CUresult result = retain_handle_locked(&id, reinterpret_cast<uintptr_t>(address));
  if (result == CUDA_SUCCESS) *handle = id;
  return result;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* properties,
                                                                       CUmemGenericAllocationHandle handle) {
  SIMCUDA_DRIVER_ENTER();
  if (properties == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  return handle_properties_locked(properties, handle);
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemExportToShareableHandle(void* shareable, CUmemGenericAllocationHandle handle,
                                                             CUmemAllocationHandleType type, unsigned long long flags) {
  SIMCUDA_DRIVER_ENTER();
  if (shareable == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  auto lock = lock_state();
  return export_handle_fd_locked(static_cast<int*>(shareable), handle);
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* os_handle,
                                                               CUmemAllocationHandleType type) {
  SIMCUDA_DRIVER_ENTER();
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  auto lock = lock_state();
  uint64_t id = 0;
  // For POSIX file descriptors the handle argument carries the fd itself.
  CUresult result = import_handle_fd_locked(&id, static_cast<int>(reinterpret_cast<intptr_t>(os_handle)));
  if (result == CUDA_SUCCESS) *handle = id;
  return result;
}
