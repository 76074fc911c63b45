// Runtime API: stream capture and CUDA graphs, forwarded to the driver (Note [Stream
// capture] in core/stream_capture.cpp).
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
