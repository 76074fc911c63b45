// Runtime API: stream capture and CUDA graphs, forwarded to the driver (Notes [Stream
// capture] in core/stream_capture.cpp and [Graph replay] in core/graphs.cpp). Capture queries
// live with the stream functions; the _ptsz variants with the other per-thread ones.
// Invariant: thin forwarders, every one returning through `finish`.
#include "runtime_common.h"

using namespace simcuda::runtime;

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuStreamBeginCapture_v2)(stream, static_cast<CUstreamCaptureMode>(mode)));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuStreamEndCapture)(stream, reinterpret_cast<CUgraph*>(graph)));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                                         unsigned long long flags) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuGraphInstantiateWithFlags)(reinterpret_cast<CUgraphExec*>(exec), graph, flags));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t graph,
                                                                  unsigned long long flags) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuGraphInstantiateWithFlags)(reinterpret_cast<CUgraphExec*>(exec), graph, flags));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphInstantiateWithParams(cudaGraphExec_t* exec, cudaGraph_t graph,
                                                                   cudaGraphInstantiateParams* params) {
  SIMCUDA_RUNTIME_ENTER();
  if (params == nullptr) return finish(cudaErrorInvalidValue);
  CUDA_GRAPH_INSTANTIATE_PARAMS driver_params{};
  driver_params.flags = params->flags;
  driver_params.hUploadStream = params->uploadStream;
  const CUresult result =
      SIMCUDA_DRIVER(cuGraphInstantiateWithParams)(reinterpret_cast<CUgraphExec*>(exec), graph, &driver_params);
  params->errNode_out = driver_params.hErrNode_out;
  params->result_out = static_cast<cudaGraphInstantiateResult>(driver_params.result_out);
  return finish(result);
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuGraphLaunch)(exec, stream));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphUpload(cudaGraphExec_t exec, cudaStream_t stream) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuGraphUpload)(exec, stream));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphExecDestroy(cudaGraphExec_t exec) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuGraphExecDestroy)(exec));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphDestroy(cudaGraph_t graph) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuGraphDestroy)(graph));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* count) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuGraphGetNodes)(graph, reinterpret_cast<CUgraphNode*>(nodes), count));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGraphDebugDotPrint(cudaGraph_t graph, const char* path, unsigned int flags) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(SIMCUDA_DRIVER(cuGraphDebugDotPrint)(graph, path, flags));
}
