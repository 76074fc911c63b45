// Resolution of the real CUDA functions (see real_cuda.hpp).
// Note [Resolving the real runtime]
// Versioned runtime symbols are looked up with dlvsym(RTLD_NEXT, name, "libcudart.so.13")
// first, then plain dlsym(RTLD_NEXT) (a runtime built without symbol versions). The driver
// (libcuda.so.1) has no versions. When a program loaded libcuda only through the runtime's
// own dlopen, RTLD_NEXT cannot see it; then we dlopen("libcuda.so.1", RTLD_NOLOAD) -- or
// load it -- and take the symbol from that handle.
#include "preload/real_cuda.hpp"

#include <dlfcn.h>

#include "api/runtime_functions.hpp"

#include <mutex>

namespace fragless::preload {
namespace {

template <typename Function>
void resolve_runtime(Function& slot, const char* name) {
  void* symbol = dlvsym(RTLD_NEXT, name, "libcudart.so.13");
  if (symbol == nullptr) symbol = dlsym(RTLD_NEXT, name);
  slot = reinterpret_cast<Function>(symbol);
}

template <typename Function>
void resolve_driver(Function& slot, const char* name) {
  void* symbol = dlsym(RTLD_NEXT, name);
  if (symbol == nullptr) {
    void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (handle == nullptr) handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (handle != nullptr) symbol = dlsym(handle, name);
  }
  slot = reinterpret_cast<Function>(symbol);
}

real_cuda_functions resolve_all() {
  real_cuda_functions functions;
  resolve_runtime(functions.malloc, "cudaMalloc");
  resolve_runtime(functions.free, "cudaFree");
  resolve_runtime(functions.malloc_async, "cudaMallocAsync");
  resolve_runtime(functions.free_async, "cudaFreeAsync");
  resolve_runtime(functions.malloc_from_pool_async, "cudaMallocFromPoolAsync");
  resolve_runtime(functions.mem_get_info, "cudaMemGetInfo");
  resolve_runtime(functions.get_device, "cudaGetDevice");
  resolve_runtime(functions.stream_create_with_flags, "cudaStreamCreateWithFlags");
  resolve_runtime(functions.stream_create_with_priority, "cudaStreamCreateWithPriority");
  resolve_runtime(functions.stream_destroy, "cudaStreamDestroy");
  resolve_runtime(functions.stream_synchronize, "cudaStreamSynchronize");
  resolve_runtime(functions.stream_get_device, "cudaStreamGetDevice");
  resolve_runtime(functions.thread_exchange_stream_capture_mode, "cudaThreadExchangeStreamCaptureMode");
  resolve_runtime(functions.get_driver_entry_point, "cudaGetDriverEntryPoint");
  resolve_runtime(functions.get_driver_entry_point_by_version, "cudaGetDriverEntryPointByVersion");
  resolve_driver(functions.cu_mem_alloc, "cuMemAlloc_v2");
  resolve_driver(functions.cu_mem_free, "cuMemFree_v2");
  resolve_driver(functions.cu_mem_alloc_async, "cuMemAllocAsync");
  resolve_driver(functions.cu_mem_free_async, "cuMemFreeAsync");
  resolve_driver(functions.cu_get_proc_address, "cuGetProcAddress_v2");
  resolve_driver(functions.cu_ctx_get_device, "cuCtxGetDevice");
  resolve_driver(functions.cu_stream_destroy, "cuStreamDestroy_v2");
  return functions;
}

}  // namespace

const real_cuda_functions& real() {
  // A function-local static is thread-safe; resolve_all does no allocation that could
  // re-enter us (dlsym may allocate host memory with malloc, which we do not interpose).
  static const real_cuda_functions functions = [] {
    real_cuda_functions resolved = resolve_all();
    // Note [Interposed runtime functions] (allocator/backend/backend.hpp).
    api::use_real_runtime_functions(reinterpret_cast<void*>(resolved.malloc), reinterpret_cast<void*>(resolved.free),
                                    reinterpret_cast<void*>(resolved.mem_get_info));
    return resolved;
  }();
  return functions;
}

namespace {
// Resolve at load time, before main and before any allocation can start the allocator.
__attribute__((constructor)) void resolve_at_load() { (void)real(); }
}  // namespace

}  // namespace fragless::preload
