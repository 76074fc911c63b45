// Runtime API: the per-thread-default-stream variants (*_ptsz, *_ptds) that programs built
// with `--default-stream per-thread` call. Each forwards to its plain twin with stream 0
// meaning cudaStreamPerThread (Note [Legacy default stream]); synchronous copies and
// memsets run on the thread's stream and wait for it. They are counted under their own names.
// Invariant: only the stream argument differs from the plain function.
#include "runtime_common.h"

namespace {

cudaStream_t per_thread(cudaStream_t stream) { return stream == nullptr ? cudaStreamPerThread : stream; }

}  // namespace

extern "C" {

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpy_ptds(void* destination, const void* source, size_t bytes,
                                                    cudaMemcpyKind kind) {
  SIMCUDA_RUNTIME_ENTER();
  cudaError_t result = cudaMemcpyAsync(destination, source, bytes, kind, cudaStreamPerThread);
  return result != cudaSuccess ? result : cudaStreamSynchronize(cudaStreamPerThread);
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemset_ptds(void* destination, int value, size_t bytes) {
  SIMCUDA_RUNTIME_ENTER();
  cudaError_t result = cudaMemsetAsync(destination, value, bytes, cudaStreamPerThread);
  return result != cudaSuccess ? result : cudaStreamSynchronize(cudaStreamPerThread);
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemcpyAsync_ptsz(void* destination, const void* source, size_t bytes,
                                                         cudaMemcpyKind kind, cudaStream_t stream) {
  SIMCUDA_RUNTIME_ENTER();
  return cudaMemcpyAsync(destination, source, bytes, kind, per_thread(stream));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMemsetAsync_ptsz(void* destination, int value, size_t bytes,
                                                         cudaStream_t stream) {
  SIMCUDA_RUNTIME_ENTER();
  return cudaMemsetAsync(destination, value, bytes, per_thread(stream));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMallocAsync_ptsz(void** pointer, size_t bytes, cudaStream_t stream) {
  SIMCUDA_RUNTIME_ENTER();
  return cudaMallocAsync(pointer, bytes, per_thread(stream));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaMallocFromPoolAsync_ptsz(void** pointer, size_t bytes, cudaMemPool_t pool,
                                                                 cudaStream_t stream) {
  SIMCUDA_RUNTIME_ENTER();
  return cudaMallocFromPoolAsync(pointer, bytes, pool, per_thread(stream));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaFreeAsync_ptsz(void* pointer, cudaStream_t stream) {
  SIMCUDA_RUNTIME_ENTER();
  return cudaFreeAsync(pointer, per_thread(stream));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamSynchronize_ptsz(cudaStream_t stream) {
  SIMCUDA_RUNTIME_ENTER();
  return cudaStreamSynchronize(per_thread(stream));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamQuery_ptsz(cudaStream_t stream) {
  SIMCUDA_RUNTIME_ENTER();
  return cudaStreamQuery(per_thread(stream));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event,
                                                             unsigned int flags) {
  SIMCUDA_RUNTIME_ENTER();
  return cudaStreamWaitEvent(per_thread(stream), event, flags);
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamGetPriority_ptsz(cudaStream_t stream, int* priority) {
  SIMCUDA_RUNTIME_ENTER();
  return cudaStreamGetPriority(per_thread(stream), priority);
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamGetFlags_ptsz(cudaStream_t stream, unsigned int* flags) {
  SIMCUDA_RUNTIME_ENTER();
  return cudaStreamGetFlags(per_thread(stream), flags);
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamGetDevice_ptsz(cudaStream_t stream, int* device) {
  SIMCUDA_RUNTIME_ENTER();
  return cudaStreamGetDevice(per_thread(stream), device);
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamGetId_ptsz(cudaStream_t stream, unsigned long long* id) {
  SIMCUDA_RUNTIME_ENTER();
  return cudaStreamGetId(per_thread(stream), id);
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamIsCapturing_ptsz(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  SIMCUDA_RUNTIME_ENTER();
  return cudaStreamIsCapturing(per_thread(stream), status);
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamGetCaptureInfo_ptsz(cudaStream_t stream, cudaStreamCaptureStatus* status,
                                                                  unsigned long long* id, cudaGraph_t* graph,
                                                                  const cudaGraphNode_t** dependencies,
                                                                  const cudaGraphEdgeData** edge_data, size_t* count) {
  SIMCUDA_RUNTIME_ENTER();
  return cudaStreamGetCaptureInfo(per_thread(stream), status, id, graph, dependencies, edge_data, count);
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamBeginCapture_ptsz(cudaStream_t stream, cudaStreamCaptureMode mode) {
  SIMCUDA_RUNTIME_ENTER();
  return cudaStreamBeginCapture(per_thread(stream), mode);
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t* graph) {
  SIMCUDA_RUNTIME_ENTER();
  return cudaStreamEndCapture(per_thread(stream), graph);
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t* exec, cudaGraph_t graph,
                                                                        cudaGraphInstantiateParams* params) {
  SIMCUDA_RUNTIME_ENTER();
  return cudaGraphInstantiateWithParams(exec, graph, params);
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphLaunch_ptsz(cudaGraphExec_t exec, cudaStream_t stream) {
  SIMCUDA_RUNTIME_ENTER();
  return cudaGraphLaunch(exec, per_thread(stream));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphUpload_ptsz(cudaGraphExec_t exec, cudaStream_t stream) {
  SIMCUDA_RUNTIME_ENTER();
  return cudaGraphUpload(exec, per_thread(stream));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream) {
  SIMCUDA_RUNTIME_ENTER();
  return cudaEventRecord(event, per_thread(stream));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaEventRecordWithFlags_ptsz(cudaEvent_t event, cudaStream_t stream,
                                                                  unsigned int flags) {
  SIMCUDA_RUNTIME_ENTER();
  return cudaEventRecordWithFlags(event, per_thread(stream), flags);
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaLaunchKernel_ptsz(const void* function, dim3 grid, dim3 block, void** arguments,
                                                          size_t shared_bytes, cudaStream_t stream) {
  SIMCUDA_RUNTIME_ENTER();
  return cudaLaunchKernel(function, grid, block, arguments, shared_bytes, per_thread(stream));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion_ptsz(const char* symbol, void** function,
                                                                          unsigned int cuda_version,
                                                                          unsigned long long flags,
                                                                          cudaDriverEntryPointQueryResult* status) {
  SIMCUDA_RUNTIME_ENTER();
  return cudaGetDriverEntryPointByVersion(symbol, function, cuda_version, flags, status);
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGetDriverEntryPoint_ptsz(const char* symbol, void** function,
                                                                 unsigned long long flags,
                                                                 cudaDriverEntryPointQueryResult* status) {
  SIMCUDA_RUNTIME_ENTER();
  return cudaGetDriverEntryPointByVersion(symbol, function, 13000, flags, status);
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaLaunchHostFunc_ptsz(cudaStream_t stream, cudaHostFn_t function,
                                                            void* user_data) {
  SIMCUDA_RUNTIME_ENTER();
  return cudaLaunchHostFunc(per_thread(stream), function, user_data);
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamAddCallback_ptsz(cudaStream_t stream, cudaStreamCallback_t callback,
                                                               void* user_data, unsigned int flags) {
  SIMCUDA_RUNTIME_ENTER();
  return cudaStreamAddCallback(per_thread(stream), callback, user_data, flags);
}

}  // extern "C"
