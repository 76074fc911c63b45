// Driver API: stream-ordered allocation (one default pool per device) and IPC handles.
//
// Note [Simple memory pools]
// cuMemAllocAsync allocates at once (like cuMemAlloc) and remembers the pool. cuMemFreeAsync
// enqueues a free op on the stream; the memory is freed when that op completes, i.e. after
// the stream's earlier work. The race oracle then reports other streams' pending ops that
// still touch it. Pools keep nothing cached (release threshold is stored, not used), so
// reserved == used and cuMemPoolTrimTo has nothing to do.
// IPC handles work within one process: opening returns the exporter's own pointer.
//
// Note [IPC events]
// An interprocess event (CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING) exports a handle
// naming the exporting process and event. Opened in the exporting process it is that
// event; opened in another process it is a fresh event that is already complete: simcuda
// cannot see another process's streams, and copies take effect when enqueued
// (Note [Copies take effect at enqueue]), so the data an exporter wrote before recording is already
// there. Waiting on it orders nothing, and the race oracle sees nothing across processes.
#include <unistd.h>

#include <cstring>
#include <memory>

#include "../core/device_memory.h"
#include "driver_common.h"

using namespace simcuda;

namespace {

MemoryPool* resolve_pool_locked(CUmemoryPool handle) {
  for (Device& device : state().devices)
    if (reinterpret_cast<CUmemoryPool>(device.default_pool.get()) == handle) return device.default_pool.get();
  return nullptr;
}

// Note [Stream capture]: graph memory nodes are not emulated, so stream-ordered allocation
// on a capturing stream is refused (and invalidates the capture). Runs `body(stream)` when
// the call may go on (Note [Stream arguments]); the caller holds the state lock.
template <typename Body>
CUresult on_pool_stream_locked(CUstream handle, Body&& body) {
  return on_work_stream_locked(handle, [&body](Stream& stream) -> CUresult {
    if (CUresult refused = refuse_uncapturable_locked(stream); refused != CUDA_SUCCESS) return refused;
    return body(stream);
  });
}

CUresult pool_alloc(CUdeviceptr* pointer, size_t bytes, MemoryPool* pool, CUstream handle) {
  if (pointer == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  return on_pool_stream_locked(handle, [&](Stream&) {
    void* allocated = nullptr;
    CUresult result = device_malloc_locked(pool->device, bytes, true, &allocated);
    if (result == CUDA_SUCCESS) *pointer = reinterpret_cast<CUdeviceptr>(allocated);
    return result;
  });
}

CUresult default_pool(CUmemoryPool* pool, CUdevice device) {
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  if (!valid_device_locked(device)) return CUDA_ERROR_INVALID_DEVICE;
  *pool = reinterpret_cast<CUmemoryPool>(state().devices[static_cast<size_t>(device)].default_pool.get());
  return CUDA_SUCCESS;
}

// The pool attribute calls: a null value or an unknown pool is CUDA_ERROR_INVALID_VALUE.
// Takes the state lock and runs `body(pool)`.
template <typename Body>
CUresult on_pool_attribute(CUmemoryPool handle, void* value, Body&& body) {
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  MemoryPool* pool = resolve_pool_locked(handle);
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return body(*pool);
}

}  // namespace

SIMCUDA_EXPORT CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice device) {
  SIMCUDA_DRIVER_ENTER();
  return default_pool(pool, device);
}

// The current pool is always the default one (Note [Simple memory pools]).
SIMCUDA_EXPORT CUresult CUDAAPI cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice device) {
  SIMCUDA_DRIVER_ENTER();
  return default_pool(pool, device);
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr* pointer, size_t bytes, CUstream stream) {
  SIMCUDA_DRIVER_ENTER();
  auto lock = lock_state();
  return on_stream_locked(stream, [&](Stream& resolved) {
    return pool_alloc(pointer, bytes, state().devices[static_cast<size_t>(resolved.device)].default_pool.get(), stream);
  });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr* pointer, size_t bytes, CUmemoryPool pool,
                                                        CUstream stream) {
  SIMCUDA_DRIVER_ENTER();
  auto lock = lock_state();
  MemoryPool* resolved = resolve_pool_locked(pool);
  if (resolved == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return pool_alloc(pointer, bytes, resolved, stream);
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr pointer, CUstream stream) {
  SIMCUDA_DRIVER_ENTER();
  auto lock = lock_state();
  return on_pool_stream_locked(stream, [pointer](Stream& resolved) {
    Region* region = find_region_locked(to_address(pointer));
    if (region == nullptr || region->begin != to_address(pointer) || region->kind != RegionKind::malloc ||
        region->free_pending)
      return CUDA_ERROR_INVALID_VALUE;
    region->free_pending = true;
    uintptr_t begin = region->begin;
    launch_locked(resolved, {}, [begin] { device_free_locked(reinterpret_cast<void*>(begin)); }, "freeAsync", 0);
    return CUDA_SUCCESS;
  });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attribute, void* value) {
  SIMCUDA_DRIVER_ENTER();
  return on_pool_attribute(pool, value, [attribute, value](MemoryPool& resolved) {
    switch (attribute) {
      case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
      case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
      case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: *static_cast<int*>(value) = 1; return CUDA_SUCCESS;
      case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *static_cast<cuuint64_t*>(value) = resolved.release_threshold; return CUDA_SUCCESS;
      case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *static_cast<cuuint64_t*>(value) = resolved.reserved_bytes; return CUDA_SUCCESS;
      case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *static_cast<cuuint64_t*>(value) = resolved.reserved_high; return CUDA_SUCCESS;
      case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *static_cast<cuuint64_t*>(value) = resolved.used_bytes; return CUDA_SUCCESS;
      case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *static_cast<cuuint64_t*>(value) = resolved.used_high; return CUDA_SUCCESS;
      default: return CUDA_ERROR_INVALID_VALUE;
    }
  });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attribute, void* value) {
  SIMCUDA_DRIVER_ENTER();
  return on_pool_attribute(pool, value, [attribute, value](MemoryPool& resolved) {
    switch (attribute) {
      case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
      case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
      case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: return CUDA_SUCCESS;
      case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: resolved.release_threshold = *static_cast<cuuint64_t*>(value); return CUDA_SUCCESS;
      case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: resolved.reserved_high = resolved.reserved_bytes; return CUDA_SUCCESS;
      case CU_MEMPOOL_ATTR_USED_MEM_HIGH: resolved.used_high = resolved.used_bytes; return CUDA_SUCCESS;
      default: return CUDA_ERROR_INVALID_VALUE;
    }
  });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t) {
  SIMCUDA_DRIVER_ENTER();
  auto lock = lock_state();
  return resolve_pool_locked(pool) != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc* descriptors, size_t count) {
  SIMCUDA_DRIVER_ENTER();
  auto lock = lock_state();
  if (resolve_pool_locked(pool) == nullptr || (count > 0 && descriptors == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  for (size_t index = 0; index < count; ++index)
    if (!valid_device_locked(descriptors[index].location.id)) return CUDA_ERROR_INVALID_DEVICE;
  return CUDA_SUCCESS;
}

namespace {
constexpr char kIpcMagic[16] = "simcuda-ipc-v1";
constexpr char kIpcEventMagic[16] = "simcuda-ipcev1";
}

SIMCUDA_EXPORT CUresult CUDAAPI cuIpcGetEventHandle(CUipcEventHandle* handle, CUevent event) {
  SIMCUDA_DRIVER_ENTER();
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  Event* found = resolve_event_locked(event);
  if (found == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if ((found->flags & CU_EVENT_INTERPROCESS) == 0 || (found->flags & CU_EVENT_DISABLE_TIMING) == 0)
    return CUDA_ERROR_INVALID_VALUE;
  const int64_t pid = static_cast<int64_t>(getpid());
  std::memset(handle->reserved, 0, sizeof handle->reserved);
  std::memcpy(handle->reserved, kIpcEventMagic, sizeof kIpcEventMagic);
  std::memcpy(handle->reserved + sizeof kIpcEventMagic, &pid, sizeof pid);
  std::memcpy(handle->reserved + sizeof kIpcEventMagic + sizeof pid, &event, sizeof event);
  return CUDA_SUCCESS;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuIpcOpenEventHandle(CUevent* event, CUipcEventHandle handle) {
  SIMCUDA_DRIVER_ENTER();
  if (event == nullptr || std::memcmp(handle.reserved, kIpcEventMagic, sizeof kIpcEventMagic) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  int64_t pid = 0;
  CUevent exported = nullptr;
  std::memcpy(&pid, handle.reserved + sizeof kIpcEventMagic, sizeof pid);
  std::memcpy(&exported, handle.reserved + sizeof kIpcEventMagic + sizeof pid, sizeof exported);
  auto lock = lock_state();
  if (pid == static_cast<int64_t>(getpid())) {
    if (resolve_event_locked(exported) == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *event = exported;
    return CUDA_SUCCESS;
  }
  auto created = std::make_unique<Event>();  // Note [IPC events]: complete, never recorded here
  created->flags = CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING;
  created->device = context_device();
  *event = to_handle(created.get());
  state().events.emplace(static_cast<void*>(created.get()), std::move(created));
  return CUDA_SUCCESS;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr pointer) {
  SIMCUDA_DRIVER_ENTER();
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  Region* region = find_region_locked(to_address(pointer));
  if (region == nullptr || region->kind != RegionKind::malloc) return CUDA_ERROR_INVALID_VALUE;
  std::memset(handle->reserved, 0, sizeof handle->reserved);
  std::memcpy(handle->reserved, kIpcMagic, sizeof kIpcMagic);
  std::memcpy(handle->reserved + sizeof kIpcMagic, &region->begin, sizeof region->begin);
  return CUDA_SUCCESS;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuIpcOpenMemHandle_v2(CUdeviceptr* pointer, CUipcMemHandle handle, unsigned int) {
  SIMCUDA_DRIVER_ENTER();
  if (pointer == nullptr || std::memcmp(handle.reserved, kIpcMagic, sizeof kIpcMagic) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  uintptr_t begin = 0;
  std::memcpy(&begin, handle.reserved + sizeof kIpcMagic, sizeof begin);
  auto lock = lock_state();
  Region* region = find_region_locked(begin);
  if (region == nullptr || region->begin != begin) return CUDA_ERROR_INVALID_VALUE;
  ++state().ipc_opened[begin];
  *pointer = static_cast<CUdeviceptr>(begin);
  return CUDA_SUCCESS;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuIpcCloseMemHandle(CUdeviceptr pointer) {
  SIMCUDA_DRIVER_ENTER();
  auto lock = lock_state();
  auto found = state().ipc_opened.find(to_address(pointer));
  if (found == state().ipc_opened.end()) return CUDA_ERROR_INVALID_VALUE;
  if (--found->second == 0) state().ipc_opened.erase(found);
  return CUDA_SUCCESS;
}
