// The real CUDA backend: with driver_entry_points.*, the only code of libfragless that
// includes CUDA headers. Runtime calls (cudaMalloc, events, streams) go through libcudart;
// VMM calls go through the driver entry points that driver_entry_points.cpp resolves with
// cudaGetDriverEntryPointByVersion, so libfragless never links libcuda directly. Invariant: every call restores the caller's current
// device (Note [Device guard]) and never throws.
#include "backend/backend.hpp"
#include "backend/capture_aware_backend.hpp"
#include "backend/driver_entry_points.hpp"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <vector>

namespace fragless::backend {
namespace {

// Note [Device guard]
// cudaMalloc, cudaEventCreate and friends act on the calling thread's current device.
// The allocator serves any device from any thread, so each call that depends on it
// switches to the wanted device and switches back, leaving the caller's state alone; it
// switches back only when it switched (no CUDA call changes the current device), so a
// caller already on the device pays one cudaGetDevice. A call that names a created stream
// acts on that stream's device whatever the current one is -- CUDA records an event on a
// stream of the event's own device and lets a stream wait on any device's event -- so an
// event record or wait switches only for the handles that mean the current device's
// default stream (0, cudaStreamLegacy, cudaStreamPerThread). A many-stream loop makes one
// of those calls on most large allocations (Note [Standing waits] in event_pool.hpp).
class device_guard {
 public:
  explicit device_guard(int device, bool needed = true) noexcept {
    if (!needed) return;
    int current = -1;
    if (cudaGetDevice(&current) == cudaSuccess && current == device) return;
    if (cudaSetDevice(device) == cudaSuccess && current >= 0) previous_ = current;
  }
  ~device_guard() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;

 private:
  int previous_ = -1;  // the caller's device, when switched from it
};

// Note [Device guard]: whether `stream` means the current device's default stream.
bool is_default_stream_handle(cudaStream_t stream) noexcept {
  return stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread;
}

thread_local std::string last_error;

// Note [Interposed runtime functions] (backend.hpp): set once, before first use.
runtime_memory_functions runtime_overrides;

cudaError_t runtime_malloc(void** address, std::size_t bytes) {
  if (runtime_overrides.malloc != nullptr)
    return reinterpret_cast<cudaError_t (*)(void**, std::size_t)>(runtime_overrides.malloc)(address, bytes);
  return cudaMalloc(address, bytes);
}

cudaError_t runtime_free(void* address) {
  if (runtime_overrides.free != nullptr) return reinterpret_cast<cudaError_t (*)(void*)>(runtime_overrides.free)(address);
  return cudaFree(address);
}

cudaError_t runtime_mem_get_info(std::size_t* free_bytes, std::size_t* total_bytes) {
  if (runtime_overrides.mem_get_info != nullptr)
    return reinterpret_cast<cudaError_t (*)(std::size_t*, std::size_t*)>(runtime_overrides.mem_get_info)(free_bytes,
                                                                                                     total_bytes);
  return cudaMemGetInfo(free_bytes, total_bytes);
}

status from_runtime(cudaError_t error, const char* what) noexcept {
  if (error == cudaSuccess) return status::ok;
  if (error == cudaErrorNotReady) {
    cudaGetLastError();
    return status::not_ready;
  }
  try {
    last_error = std::string(what) + ": " + cudaGetErrorName(error) + " (" + cudaGetErrorString(error) + ")";
  } catch (...) {
  }
  cudaGetLastError();  // clear the sticky-free error so later calls start clean
  return error == cudaErrorMemoryAllocation ? status::out_of_memory : status::error;
}

status from_driver(CUresult result, const char* what) noexcept {
  if (result == CUDA_SUCCESS) return status::ok;
  try {
    last_error = std::string(what) + ": CUresult " + std::to_string(static_cast<int>(result));
  } catch (...) {
  }
  return result == CUDA_ERROR_OUT_OF_MEMORY ? status::out_of_memory : status::error;
}

// Note [Capture underway]: allocation calls made while a graph capture is underway run in
// relaxed capture mode on this thread, so they neither fail nor invalidate the capture.
class relaxed_capture_guard {
 public:
  relaxed_capture_guard() noexcept {
    if (!capture_underway()) return;
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    if (cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess) {
      previous_ = mode;
      active_ = true;
    } else {
      cudaGetLastError();
    }
  }
  ~relaxed_capture_guard() {
    if (active_ && cudaThreadExchangeStreamCaptureMode(&previous_) != cudaSuccess) cudaGetLastError();
  }
  relaxed_capture_guard(const relaxed_capture_guard&) = delete;
  relaxed_capture_guard& operator=(const relaxed_capture_guard&) = delete;

 private:
  cudaStreamCaptureMode previous_ = cudaStreamCaptureModeGlobal;
  bool active_ = false;
};

class cuda_backend final : public backend {
 public:
  const char* name() const noexcept override { return "cuda"; }

  int device_count() noexcept override {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return count;
  }

  status get_memory_info(int device, memory_info* info) noexcept override {
    device_guard guard(device);
    std::size_t free_bytes = 0, total_bytes = 0;
    status result = from_runtime(runtime_mem_get_info(&free_bytes, &total_bytes), "cudaMemGetInfo");
    info->free_bytes = free_bytes;
    info->total_bytes = total_bytes;
    return result;
  }

  status stream_device(stream_handle stream, int fallback_device, int* device) noexcept override {
    if (stream == nullptr) {
      *device = fallback_device;
      return status::ok;
    }
    // Note [Capture underway]: a capturing stream's device may not be asked (CUDA refuses
    // and invalidates the capture); the caller's device stands for it.
    cudaStreamCaptureStatus capture_status = cudaStreamCaptureStatusNone;
    const cudaError_t asked = cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &capture_status);
    if (asked != cudaSuccess) cudaGetLastError();  // the query below reports a bad stream
    if (asked == cudaErrorStreamCaptureImplicit ||
        (asked == cudaSuccess && capture_status != cudaStreamCaptureStatusNone)) {
      *device = fallback_device;
      return status::ok;
    }
    relaxed_capture_guard relaxed;
    return from_runtime(cudaStreamGetDevice(static_cast<cudaStream_t>(stream), device), "cudaStreamGetDevice");
  }

  status synchronize_device(int device) noexcept override {
    device_guard guard(device);
    return from_runtime(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }

  std::string last_error_text() noexcept override {
    try {
      return last_error;
    } catch (...) {
      return {};
    }
  }

  status malloc_segment(int device, std::size_t bytes, void** address) noexcept override {
    relaxed_capture_guard relaxed;  // Note [Capture underway]
    device_guard guard(device);
    return from_runtime(runtime_malloc(address, bytes), "cudaMalloc");
  }

  status free_segment(int device, void* address) noexcept override {
    device_guard guard(device);
    return from_runtime(runtime_free(address), "cudaFree");
  }

  bool supports_vmm(int device) noexcept override {
    const driver_entry_points& table = drivers();
    if (!table.complete) return false;
    int supported = 0;
    if (table.device_attribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device) !=
        CUDA_SUCCESS)
      return false;
    return supported != 0;
  }

  std::size_t vmm_granularity_bytes(int device) noexcept override {
    const driver_entry_points& table = drivers();
    std::size_t granularity = 0;
    CUmemAllocationProp prop = device_allocation_prop(device);
    if (!table.complete ||
        table.granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) != CUDA_SUCCESS ||
        granularity == 0)
      return std::size_t{2} << 20;
    return granularity;
  }

  status reserve_address_range(int device, std::size_t bytes, std::uintptr_t* base) noexcept override {
    relaxed_capture_guard relaxed;  // Note [Capture underway]
    (void)device;
    CUdeviceptr pointer = 0;
    status result = from_driver(drivers().address_reserve(&pointer, bytes, 0, 0, 0), "cuMemAddressReserve");
    *base = static_cast<std::uintptr_t>(pointer);
    return result;
  }

  status free_address_range(int device, std::uintptr_t base, std::size_t bytes) noexcept override {
    (void)device;
    return from_driver(drivers().address_free(static_cast<CUdeviceptr>(base), bytes), "cuMemAddressFree");
  }

  status create_physical(int device, std::size_t bytes, physical_handle* handle) noexcept override {
    relaxed_capture_guard relaxed;  // Note [Capture underway]
    CUmemAllocationProp prop = device_allocation_prop(device);
    CUmemGenericAllocationHandle created = 0;
    // Exportable as a file descriptor (Note [IPC sharing]) where the driver allows it; a
    // driver that refuses the handle type once gets plain allocations from then on.
    if (exportable_.load(std::memory_order_relaxed)) {
      prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
      const CUresult first = drivers().mem_create(&created, bytes, &prop, 0);
      if (first != CUDA_ERROR_NOT_SUPPORTED && first != CUDA_ERROR_INVALID_VALUE) {
        *handle = static_cast<physical_handle>(created);
        return from_driver(first, "cuMemCreate");
      }
      exportable_.store(false, std::memory_order_relaxed);
      prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
    }
    status result = from_driver(drivers().mem_create(&created, bytes, &prop, 0), "cuMemCreate");
    *handle = static_cast<physical_handle>(created);
    return result;
  }

  status release_physical(int device, physical_handle handle) noexcept override {
    (void)device;
    return from_driver(drivers().mem_release(static_cast<CUmemGenericAllocationHandle>(handle)), "cuMemRelease");
  }

  status map(int device, std::uintptr_t address, std::size_t bytes, physical_handle handle) noexcept override {
    status result = map_without_access(device, address, bytes, handle);
    if (result != status::ok) return result;
    result = set_access(device, address, bytes);
    if (result != status::ok) drivers().mem_unmap(static_cast<CUdeviceptr>(address), bytes);
    return result;
  }

  status map_without_access(int device, std::uintptr_t address, std::size_t bytes,
                            physical_handle handle) noexcept override {
    (void)device;
    relaxed_capture_guard relaxed;  // Note [Capture underway]
    return from_driver(drivers().mem_map(static_cast<CUdeviceptr>(address), bytes, 0,
                                         static_cast<CUmemGenericAllocationHandle>(handle), 0),
                       "cuMemMap");
  }

  status set_access(int device, std::uintptr_t address, std::size_t bytes) noexcept override {
    relaxed_capture_guard relaxed;  // Note [Capture underway]
    const CUmemAccessDesc access = device_read_write_access(device);
    return from_driver(drivers().set_access(static_cast<CUdeviceptr>(address), bytes, &access, 1), "cuMemSetAccess");
  }

  status unmap(int device, std::uintptr_t address, std::size_t bytes) noexcept override {
    (void)device;
    return from_driver(drivers().mem_unmap(static_cast<CUdeviceptr>(address), bytes), "cuMemUnmap");
  }

  status create_event(int device, event_handle* event) noexcept override {
    device_guard guard(device);
    cudaEvent_t created = nullptr;
    status result = from_runtime(cudaEventCreateWithFlags(&created, cudaEventDisableTiming), "cudaEventCreate");
    *event = created;
    return result;
  }

  status destroy_event(int device, event_handle event) noexcept override {
    device_guard guard(device);
    return from_runtime(cudaEventDestroy(static_cast<cudaEvent_t>(event)), "cudaEventDestroy");
  }

  status record_event(int device, event_handle event, stream_handle stream) noexcept override {
    device_guard guard(device, is_default_stream_handle(static_cast<cudaStream_t>(stream)));
    return from_runtime(cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)),
                        "cudaEventRecord");
  }

  status query_event(int device, event_handle event) noexcept override {
    (void)device;
    return from_runtime(cudaEventQuery(static_cast<cudaEvent_t>(event)), "cudaEventQuery");
  }

  status stream_wait_event(int device, stream_handle stream, event_handle event) noexcept override {
    device_guard guard(device, is_default_stream_handle(static_cast<cudaStream_t>(stream)));
    return from_runtime(
        cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event), 0),
        "cudaStreamWaitEvent");
  }

  status export_physical(int device, physical_handle handle, int* file_descriptor) noexcept override {
    (void)device;
    const driver_entry_points& table = drivers();
    if (table.export_handle == nullptr) return unsupported("cuMemExportToShareableHandle");
    if (!exportable_.load(std::memory_order_relaxed))
      return unsupported("exportable cuMemCreate allocations (the driver refused POSIX file descriptor handles)");
    return from_driver(table.export_handle(file_descriptor, static_cast<CUmemGenericAllocationHandle>(handle),
                                           CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                       "cuMemExportToShareableHandle");
  }

  status import_physical(int device, int file_descriptor, physical_handle* handle) noexcept override {
    (void)device;
    const driver_entry_points& table = drivers();
    if (table.import_handle == nullptr) return unsupported("cuMemImportFromShareableHandle");
    CUmemGenericAllocationHandle imported = 0;
    const status result = from_driver(
        table.import_handle(&imported, reinterpret_cast<void*>(static_cast<std::intptr_t>(file_descriptor)),
                            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
        "cuMemImportFromShareableHandle");
    *handle = static_cast<physical_handle>(imported);
    return result;
  }

  status export_segment(int device, void* base, ipc_segment_handle* handle) noexcept override {
    device_guard guard(device);
    cudaIpcMemHandle_t exported{};
    const status result = from_runtime(cudaIpcGetMemHandle(&exported, base), "cudaIpcGetMemHandle");
    static_assert(sizeof exported == sizeof(ipc_segment_handle));
    std::memcpy(handle->data(), &exported, sizeof exported);
    return result;
  }

  status open_segment(int device, const ipc_segment_handle& handle, void** base) noexcept override {
    device_guard guard(device);
    cudaIpcMemHandle_t opened{};
    std::memcpy(&opened, handle.data(), sizeof opened);
    return from_runtime(cudaIpcOpenMemHandle(base, opened, cudaIpcMemLazyEnablePeerAccess), "cudaIpcOpenMemHandle");
  }

  status close_segment(int device, void* base) noexcept override {
    device_guard guard(device);
    return from_runtime(cudaIpcCloseMemHandle(base), "cudaIpcCloseMemHandle");
  }

 private:
  const driver_entry_points& drivers() noexcept {
    std::call_once(drivers_loaded_, [this] { drivers_ = load_driver_entry_points(); });
    return drivers_;
  }

  static status unsupported(const char* what) noexcept {
    try {
      last_error = std::string("this CUDA driver lacks ") + what;
    } catch (...) {
    }
    return status::error;
  }

  std::once_flag drivers_loaded_;
  driver_entry_points drivers_;
  std::atomic<bool> exportable_{true};
};

}  // namespace

void use_runtime_memory_functions(const runtime_memory_functions& functions) noexcept {
  runtime_overrides = functions;
}

std::unique_ptr<backend> make_cuda_backend() {
  try {
    return std::make_unique<cuda_backend>();
  } catch (...) {
    return nullptr;
  }
}

}  // namespace fragless::backend
