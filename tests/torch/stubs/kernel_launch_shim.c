/* Test scaffolding, LD_PRELOADed into the Python tests: CUDA 13's launch path for <<<>>>
 * (__cudaGetKernel + __cudaLaunchKernel, what torch's kernels are compiled to) forwarded to
 * cudaLaunchKernel, which simcuda accepts as a no-op kernel ordered on its stream. simcuda
 * itself answers these two entry points with "not supported". */
#include <cuda_runtime_api.h>

__attribute__((visibility("default"))) cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* function) {
  if (kernel == 0 || function == 0) return cudaErrorInvalidValue;
  *kernel = (cudaKernel_t)function; /* the handle is the host stub: enough for a no-op launch */
  return cudaSuccess;
}

__attribute__((visibility("default"))) cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block,
                                                                      void** arguments, size_t shared_bytes,
                                                                      cudaStream_t stream) {
  return cudaLaunchKernel((const void*)kernel, grid, block, arguments, shared_bytes, stream);
}

__attribute__((visibility("default"))) cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 grid, dim3 block,
                                                                           void** arguments, size_t shared_bytes,
                                                                           cudaStream_t stream) {
  return cudaLaunchKernel((const void*)kernel, grid, block, arguments, shared_bytes,
                          stream != 0 ? stream : cudaStreamPerThread);
}
