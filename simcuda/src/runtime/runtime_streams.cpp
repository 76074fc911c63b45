// Runtime API: streams, events and stream-capture queries (Note [Stream capture]).
// Invariant: thin forwarders to the driver's pending-work model (Note [Vector clocks]).
#include "runtime_common.h"

using namespace simcuda::runtime;

namespace {

CUresult create_stream(cudaStream_t* stream, unsigned int flags, int priority) {
  if (stream == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult result = ensure_context();
  if (result != CUDA_SUCCESS) return result;
  return SIMCUDA_DRIVER(cuStreamCreateWithPriority)(stream, flags, priority);
}

CUresult create_event(cudaEvent_t* event, unsigned int flags) {
  CUresult result = ensure_context();
  if (result != CUDA_SUCCESS) return result;
  return SIMCUDA_DRIVER(cuEventCreate)(event, flags);
}

}  // namespace

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamCreate(cudaStream_t* stream) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(create_stream(stream, 0, 0));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(create_stream(stream, flags, 0));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamCreateWithPriority(cudaStream_t* stream, unsigned int flags, int priority) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(create_stream(stream, flags, priority));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t stream) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuStreamDestroy_v2)(stream));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamQuery(cudaStream_t stream) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuStreamQuery)(stream));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t stream) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuStreamSynchronize)(stream));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuStreamWaitEvent)(stream, event, flags));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamGetPriority(cudaStream_t stream, int* priority) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuStreamGetPriority)(stream, priority));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamGetFlags(cudaStream_t stream, unsigned int* flags) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuStreamGetFlags)(stream, flags));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamGetDevice(cudaStream_t stream, int* device) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuStreamGetDevice)(stream, device));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamGetId(cudaStream_t stream, unsigned long long* id) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuStreamGetId)(stream, id));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuStreamIsCapturing)(stream, reinterpret_cast<CUstreamCaptureStatus*>(status)));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamGetCaptureInfo(cudaStream_t stream, cudaStreamCaptureStatus* status,
                                                             unsigned long long* id, cudaGraph_t* graph,
                                                             const cudaGraphNode_t** dependencies,
                                                             const cudaGraphEdgeData** edge_data, size_t* count) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuStreamGetCaptureInfo_v3)(
      stream, reinterpret_cast<CUstreamCaptureStatus*>(status), reinterpret_cast<cuuint64_t*>(id),
      reinterpret_cast<CUgraph*>(graph),
      reinterpret_cast<const CUgraphNode**>(dependencies), reinterpret_cast<const CUgraphEdgeData**>(edge_data),
      count));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuThreadExchangeStreamCaptureMode)(reinterpret_cast<CUstreamCaptureMode*>(mode)));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaEventCreate(cudaEvent_t* event) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(create_event(event, 0));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(create_event(event, flags));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuEventRecord)(event, stream));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int flags) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuEventRecordWithFlags)(event, stream, flags));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaEventQuery(cudaEvent_t event) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuEventQuery)(event));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaEventSynchronize(cudaEvent_t event) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuEventSynchronize)(event));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaEventDestroy(cudaEvent_t event) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuEventDestroy_v2)(event));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaEventElapsedTime(float* milliseconds, cudaEvent_t start, cudaEvent_t end) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuEventElapsedTime_v2)(milliseconds, start, end));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t function, void* user_data) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuLaunchHostFunc)(stream, function, user_data));
}

// cudaStreamCallback_t and CUstreamCallback differ only in their error type, which shares
// its values (Note [Error codes]).
SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback,
                                                          void* user_data, unsigned int flags) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuStreamAddCallback)(stream, reinterpret_cast<CUstreamCallback>(callback), user_data,
                                                    flags));
}
