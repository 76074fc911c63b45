// The real CUDA entry points behind the interposer, found with dlvsym/dlsym(RTLD_NEXT).
// Invariant: every pointer here is the next definition after libfragless_preload.so in
// the loader's search order (the real libcudart / libcuda), never one of ours, so a
// forwarder that calls through this table cannot recurse into the interposer.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

namespace fragless::preload {

struct real_cuda_functions {
  // runtime (libcudart.so.13)
  cudaError_t (*malloc)(void**, size_t) = nullptr;
  cudaError_t (*free)(void*) = nullptr;
  cudaError_t (*malloc_async)(void**, size_t, cudaStream_t) = nullptr;
  cudaError_t (*free_async)(void*, cudaStream_t) = nullptr;
  cudaError_t (*malloc_from_pool_async)(void**, size_t, cudaMemPool_t, cudaStream_t) = nullptr;
  cudaError_t (*mem_get_info)(size_t*, size_t*) = nullptr;
  cudaError_t (*get_device)(int*) = nullptr;
  cudaError_t (*stream_create_with_flags)(cudaStream_t*, unsigned int) = nullptr;
  cudaError_t (*stream_create_with_priority)(cudaStream_t*, unsigned int, int) = nullptr;
  cudaError_t (*stream_destroy)(cudaStream_t) = nullptr;
  cudaError_t (*stream_synchronize)(cudaStream_t) = nullptr;
  cudaError_t (*stream_get_device)(cudaStream_t, int*) = nullptr;
  cudaError_t (*thread_exchange_stream_capture_mode)(cudaStreamCaptureMode*) = nullptr;
  cudaError_t (*get_driver_entry_point)(const char*, void**, unsigned long long,
                                        cudaDriverEntryPointQueryResult*) = nullptr;
  cudaError_t (*get_driver_entry_point_by_version)(const char*, void**, unsigned int, unsigned long long,
                                                   cudaDriverEntryPointQueryResult*) = nullptr;
  // driver (libcuda.so.1)
  CUresult (*cu_mem_alloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*cu_mem_free)(CUdeviceptr) = nullptr;
  CUresult (*cu_mem_alloc_async)(CUdeviceptr*, size_t, CUstream) = nullptr;
  CUresult (*cu_mem_free_async)(CUdeviceptr, CUstream) = nullptr;
  CUresult (*cu_get_proc_address)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*) = nullptr;
  CUresult (*cu_ctx_get_device)(CUdevice*) = nullptr;
  CUresult (*cu_stream_destroy)(CUstream) = nullptr;
};

// Resolved once, on first use from any thread; safe to call before main and from inside the
// runtime's own initialisation (no allocation, no CUDA call).
const real_cuda_functions& real();

}  // namespace fragless::preload
