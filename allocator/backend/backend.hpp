// The CUDA boundary: the only interface through which the allocator touches a device.
// Invariant: nothing above this header includes a CUDA header or calls CUDA; every
// device operation the allocator performs is one virtual call here, so unit tests can
// drive the whole allocator with a fake backend and fault injection sees every call.
// Every method is noexcept and reports failure through `status` (see Note [Backend status]).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace fragless::backend {

// Note [Backend status]
// Device calls fail in two ways the allocator must tell apart: out of memory (the OOM
// path releases cache and retries) and anything else (reported to the caller as a
// device error). `not_ready` is only returned by query_event.
enum class status : std::uint8_t { ok, out_of_memory, not_ready, error };

using stream_handle = void*;    // a cudaStream_t; nullptr is the legacy default stream
using event_handle = void*;     // a cudaEvent_t
using physical_handle = std::uint64_t;  // a CUmemGenericAllocationHandle
using ipc_segment_handle = std::array<unsigned char, 64>;  // a cudaIpcMemHandle_t

struct memory_info {
  std::uint64_t free_bytes = 0;
  std::uint64_t total_bytes = 0;
};

class backend {
 public:
  virtual ~backend() = default;

  virtual const char* name() const noexcept = 0;
  virtual int device_count() noexcept = 0;
  virtual status get_memory_info(int device, memory_info* info) noexcept = 0;
  // The device a stream belongs to (nullptr: `fallback_device`).
  virtual status stream_device(stream_handle stream, int fallback_device, int* device) noexcept = 0;
  virtual status synchronize_device(int device) noexcept = 0;
  // Text of the last failure of this thread's calls, for error messages.
  virtual std::string last_error_text() noexcept = 0;

  // ---- plain segments (cudaMalloc / cudaFree) ----
  virtual status malloc_segment(int device, std::size_t bytes, void** address) noexcept = 0;
  virtual status free_segment(int device, void* address) noexcept = 0;

  // ---- virtual memory management (VMM): reserve, create, map, unmap ----
  virtual bool supports_vmm(int device) noexcept = 0;
  // Physical allocation granularity (2 MiB on current GPUs).
  virtual std::size_t vmm_granularity_bytes(int device) noexcept = 0;
  virtual status reserve_address_range(int device, std::size_t bytes, std::uintptr_t* base) noexcept = 0;
  virtual status free_address_range(int device, std::uintptr_t base, std::size_t bytes) noexcept = 0;
  virtual status create_physical(int device, std::size_t bytes, physical_handle* handle) noexcept = 0;
  virtual status release_physical(int device, physical_handle handle) noexcept = 0;
  // Maps `handle` at `address` and grants the device read/write access.
  virtual status map(int device, std::uintptr_t address, std::size_t bytes, physical_handle handle) noexcept = 0;
  // The two halves of map(), for a caller that maps several handles side by side and then
  // grants access to the whole range in one call (Note [Access per run] in
  // core/vmm_pool_pages.cpp). Memory mapped this way must not be touched before
  // set_access covers it. The defaults do it all in the first half.
  virtual status map_without_access(int device, std::uintptr_t address, std::size_t bytes,
                                    physical_handle handle) noexcept {
    return map(device, address, bytes, handle);
  }
  // Grants the device read/write access to [address, address + bytes), all of it mapped.
  virtual status set_access(int device, std::uintptr_t address, std::size_t bytes) noexcept {
    (void)device, (void)address, (void)bytes;
    return status::ok;
  }
  virtual status unmap(int device, std::uintptr_t address, std::size_t bytes) noexcept = 0;

  // ---- events (the allocator pools them: see event_pool.hpp) ----
  virtual status create_event(int device, event_handle* event) noexcept = 0;
  virtual status destroy_event(int device, event_handle event) noexcept = 0;
  virtual status record_event(int device, event_handle event, stream_handle stream) noexcept = 0;
  // ok when complete, not_ready while pending.
  virtual status query_event(int device, event_handle event) noexcept = 0;
  virtual status stream_wait_event(int device, stream_handle stream, event_handle event) noexcept = 0;

  // ---- sharing memory with other processes (Note [IPC sharing] in core/ipc_sharing.hpp) ----
  // Backends that cannot share keep these defaults, which fail.
  // A POSIX file descriptor for a physical allocation (vmm); the caller closes it.
  virtual status export_physical(int device, physical_handle handle, int* file_descriptor) noexcept {
    (void)device, (void)handle, (void)file_descriptor;
    return status::error;
  }
  // The physical allocation behind a descriptor some process exported (the caller keeps and
  // closes the descriptor, and releases the handle).
  virtual status import_physical(int device, int file_descriptor, physical_handle* handle) noexcept {
    (void)device, (void)file_descriptor, (void)handle;
    return status::error;
  }
  // cudaMalloc segments: CUDA's IPC handle of the segment starting at `base`; opening one
  // in this process, and closing it.
  virtual status export_segment(int device, void* base, ipc_segment_handle* handle) noexcept {
    (void)device, (void)base, (void)handle;
    return status::error;
  }
  virtual status open_segment(int device, const ipc_segment_handle& handle, void** base) noexcept {
    (void)device, (void)handle, (void)base;
    return status::error;
  }
  virtual status close_segment(int device, void* base) noexcept {
    (void)device, (void)base;
    return status::error;
  }
};

// The real CUDA backend (cuda_backend.cpp). Never throws; returns nullptr only when the
// runtime cannot be initialised at all.
std::unique_ptr<backend> make_cuda_backend();

// Note [Interposed runtime functions]
// The LD_PRELOAD interposer (hooks/preload) defines cudaMalloc, cudaFree and cudaMemGetInfo
// itself, and links this backend into the same library: a direct call from here would land
// in the interposer and recurse. The interposer hands the real functions (found with
// dlvsym(RTLD_NEXT)) to the backend before the allocator starts; a null entry keeps the
// direct call. The pointers are the runtime's own signatures, type-erased to keep CUDA
// headers out of this file.
struct runtime_memory_functions {
  void* malloc = nullptr;        // cudaError_t (*)(void**, size_t)
  void* free = nullptr;          // cudaError_t (*)(void*)
  void* mem_get_info = nullptr;  // cudaError_t (*)(size_t*, size_t*)
};
void use_runtime_memory_functions(const runtime_memory_functions& functions) noexcept;

}  // namespace fragless::backend
