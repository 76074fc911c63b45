// Driver API: stream capture and CUDA graphs (Note [Stream capture] in
// core/stream_capture.cpp). Graph and exec handles are the objects' addresses.
#include "../core/pending_work.h"
#include "../core/stream_capture.h"
#include <algorithm>

#include "driver_common.h"

using namespace simcuda;

namespace {

CUresult begin(CUstream stream, CUstreamCaptureMode mode) {
  auto lock = lock_state();
  Stream* resolved = resolve_stream_locked(stream);
  if (resolved == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  return begin_capture_locked(*resolved, mode);
}

}  // namespace

// Not declared by cuda.h in the driver's own (internal) view; the public name maps here.
extern "C" CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long flags);

SIMCUDA_EXPORT CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream stream, CUstreamCaptureMode mode) {
  SIMCUDA_DRIVER_ENTER();
  return begin(stream, mode);
}

SIMCUDA_EXPORT CUresult CUDAAPI cuStreamEndCapture(CUstream stream, CUgraph* graph) {
  SIMCUDA_DRIVER_ENTER();
  if (graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  Stream* resolved = resolve_stream_locked(stream);
  if (resolved == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  Graph* made = nullptr;
  const CUresult result = end_capture_locked(*resolved, &made);
  *graph = reinterpret_cast<CUgraph>(made);
  return result;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  SIMCUDA_DRIVER_ENTER();
  if (mode == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (*mode != CU_STREAM_CAPTURE_MODE_GLOBAL && *mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      *mode != CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  *mode = exchange_thread_capture_mode(*mode);
  return CUDA_SUCCESS;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long) {
  SIMCUDA_DRIVER_ENTER();
  if (exec == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  Graph* found = resolve_graph_locked(graph);
  if (found == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *exec = reinterpret_cast<CUgraphExec>(instantiate_graph_locked(*found));
  return CUDA_SUCCESS;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  SIMCUDA_DRIVER_ENTER();
  auto lock = lock_state();
  Graph* found = resolve_exec_locked(exec);
  Stream* resolved = resolve_stream_locked(stream);
  if (found == nullptr || resolved == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  return launch_graph_locked(*found, *resolved);
}

SIMCUDA_EXPORT CUresult CUDAAPI cuGraphUpload(CUgraphExec exec, CUstream stream) {
  SIMCUDA_DRIVER_ENTER();
  auto lock = lock_state();
  if (resolve_exec_locked(exec) == nullptr || resolve_stream_locked(stream) == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  return CUDA_SUCCESS;  // nothing to upload: replay reads the recorded ops
}

SIMCUDA_EXPORT CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec exec) {
  SIMCUDA_DRIVER_ENTER();
  auto lock = lock_state();
  return destroy_exec_locked(exec) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuGraphDestroy(CUgraph graph) {
  SIMCUDA_DRIVER_ENTER();
  auto lock = lock_state();
  return destroy_graph_locked(graph) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// Nodes are the recorded ops; their handles only count (simcuda has no node API).
SIMCUDA_EXPORT CUresult CUDAAPI cuGraphGetNodes(CUgraph graph, CUgraphNode* nodes, size_t* count) {
  SIMCUDA_DRIVER_ENTER();
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  Graph* found = resolve_graph_locked(graph);
  if (found == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (nodes != nullptr) {
    const size_t filled = std::min(*count, found->ops.size());
    for (size_t index = 0; index < filled; ++index)
      nodes[index] = reinterpret_cast<CUgraphNode>(&found->ops[index]);
    *count = filled;
  } else {
    *count = found->ops.size();
  }
  return CUDA_SUCCESS;
}
