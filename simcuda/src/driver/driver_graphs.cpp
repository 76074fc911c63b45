// Driver API: stream capture and CUDA graphs (Notes [Stream capture] in
// core/stream_capture.cpp and [Graph replay] in core/graphs.cpp), with every versioned and
// per-thread-default-stream (_ptsz) name the real libcuda.so.1 exports for them. In a _ptsz
// variant stream 0 means CU_STREAM_PER_THREAD. Graph, exec and node handles are addresses.
// Invariant: thin forwarders; each opens with SIMCUDA_DRIVER_ENTER and takes the state lock.
#include <algorithm>

#include "../core/graphs.h"
#include "../core/pending_work.h"
#include "../core/stream_capture.h"
#include "driver_common.h"

using namespace simcuda;

// Not declared by cuda.h in the driver's own (internal) view; the public name maps here.
extern "C" CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long flags);

namespace {

CUstream per_thread(CUstream stream) { return stream == nullptr ? CU_STREAM_PER_THREAD : stream; }

CUresult begin(CUstream stream, CUstreamCaptureMode mode) {
  auto lock = lock_state();
  return on_stream_locked(stream, [mode](Stream& resolved) { return begin_capture_locked(resolved, mode); });
}

CUresult end(CUstream stream, CUgraph* graph) {
  if (graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  return on_stream_locked(stream, [graph](Stream& resolved) {
    Graph* made = nullptr;
    const CUresult result = end_capture_locked(resolved, &made);
    *graph = reinterpret_cast<CUgraph>(made);
    return result;
  });
}

// Capture queries: asking about the legacy stream while a blocking stream captures is refused
// but does not invalidate the capture (Note [Stream capture]).
template <typename Body>
CUresult on_queried_stream_locked(CUstream handle, Body&& body) {
  return on_stream_locked(handle, [&body](Stream& stream) -> CUresult {
    if (CUresult refused = check_legacy_stream_use_locked(stream, false); refused != CUDA_SUCCESS) return refused;
    return body(stream);
  });
}

CUresult is_capturing(CUstream stream, CUstreamCaptureStatus* status) {
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  return on_queried_stream_locked(stream, [status](Stream& resolved) {
    *status = capture_status_locked(resolved, nullptr);
    return CUDA_SUCCESS;
  });
}

CUresult capture_info(CUstream stream, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph* graph,
                      const CUgraphNode** dependencies, const CUgraphEdgeData** edge_data, size_t* count) {
  if (status == nullptr || (edge_data != nullptr && dependencies == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  return on_queried_stream_locked(stream, [&](Stream& resolved) {
    uint64_t capture_id = 0;
    Graph* building = nullptr;
    capture_info_locked(resolved, status, &capture_id, &building, dependencies, edge_data, count);
    if (id != nullptr) *id = capture_id;
    if (graph != nullptr) *graph = reinterpret_cast<CUgraph>(building);
    return CUDA_SUCCESS;
  });
}

CUresult instantiate(CUgraphExec* exec, CUgraph graph) {
  if (exec == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  Graph* found = resolve_graph_locked(graph);
  if (found == nullptr) found = resolve_capturing_graph_locked(graph);  // the nodes captured so far
  if (found == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *exec = reinterpret_cast<CUgraphExec>(instantiate_graph_locked(*found));
  return CUDA_SUCCESS;
}

CUresult instantiate_with_params(CUgraphExec* exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  if (params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const CUresult result = instantiate(exec, graph);
  params->hErrNode_out = nullptr;
  params->result_out = result == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
  return result;
}

// Old signature: an error node and a log buffer, left empty (instantiation cannot fail).
CUresult instantiate_with_log(CUgraphExec* exec, CUgraph graph, CUgraphNode* error_node, char* log, size_t log_bytes) {
  if (error_node != nullptr) *error_node = nullptr;
  if (log != nullptr && log_bytes > 0) log[0] = '\0';
  return instantiate(exec, graph);
}

CUresult launch(CUgraphExec exec, CUstream stream) {
  auto lock = lock_state();
  Graph* found = resolve_exec_locked(exec);
  Stream* resolved = resolve_stream_locked(stream);
  if (found == nullptr || resolved == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult refused = check_legacy_stream_use_locked(*resolved, true); refused != CUDA_SUCCESS) return refused;
  return launch_graph_locked(*found, *resolved);
}

CUresult upload(CUgraphExec exec, CUstream stream) {
  auto lock = lock_state();
  Stream* resolved = resolve_stream_locked(stream);
  if (resolve_exec_locked(exec) == nullptr || resolved == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  return check_legacy_stream_use_locked(*resolved, true);  // nothing to upload: replay reads the nodes
}

}  // namespace

// ---- capture ------------------------------------------------------------------------------

// The CUDA 10.0 signature, before capture modes: a global-mode capture.
SIMCUDA_EXPORT CUresult CUDAAPI cuStreamBeginCapture(CUstream stream) {
  SIMCUDA_DRIVER_ENTER();
  return begin(stream, CU_STREAM_CAPTURE_MODE_GLOBAL);
}
SIMCUDA_EXPORT CUresult CUDAAPI cuStreamBeginCapture_ptsz(CUstream stream) {
  SIMCUDA_DRIVER_ENTER();
  return begin(per_thread(stream), CU_STREAM_CAPTURE_MODE_GLOBAL);
}
SIMCUDA_EXPORT CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream stream, CUstreamCaptureMode mode) {
  SIMCUDA_DRIVER_ENTER();
  return begin(stream, mode);
}
SIMCUDA_EXPORT CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream stream, CUstreamCaptureMode mode) {
  SIMCUDA_DRIVER_ENTER();
  return begin(per_thread(stream), mode);
}

SIMCUDA_EXPORT CUresult CUDAAPI cuStreamEndCapture(CUstream stream, CUgraph* graph) {
  SIMCUDA_DRIVER_ENTER();
  return end(stream, graph);
}
SIMCUDA_EXPORT CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream stream, CUgraph* graph) {
  SIMCUDA_DRIVER_ENTER();
  return end(per_thread(stream), graph);
}

SIMCUDA_EXPORT CUresult CUDAAPI cuStreamIsCapturing(CUstream stream, CUstreamCaptureStatus* status) {
  SIMCUDA_DRIVER_ENTER();
  return is_capturing(stream, status);
}
SIMCUDA_EXPORT CUresult CUDAAPI cuStreamIsCapturing_ptsz(CUstream stream, CUstreamCaptureStatus* status) {
  SIMCUDA_DRIVER_ENTER();
  return is_capturing(per_thread(stream), status);
}

SIMCUDA_EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo(CUstream stream, CUstreamCaptureStatus* status, cuuint64_t* id) {
  SIMCUDA_DRIVER_ENTER();
  return capture_info(stream, status, id, nullptr, nullptr, nullptr, nullptr);
}
SIMCUDA_EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo_ptsz(CUstream stream, CUstreamCaptureStatus* status,
                                                            cuuint64_t* id) {
  SIMCUDA_DRIVER_ENTER();
  return capture_info(per_thread(stream), status, id, nullptr, nullptr, nullptr, nullptr);
}
SIMCUDA_EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo_v2(CUstream stream, CUstreamCaptureStatus* status, cuuint64_t* id,
                                                          CUgraph* graph, const CUgraphNode** dependencies,
                                                          size_t* count) {
  SIMCUDA_DRIVER_ENTER();
  return capture_info(stream, status, id, graph, dependencies, nullptr, count);
}
SIMCUDA_EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo_v2_ptsz(CUstream stream, CUstreamCaptureStatus* status,
                                                               cuuint64_t* id, CUgraph* graph,
                                                               const CUgraphNode** dependencies, size_t* count) {
  SIMCUDA_DRIVER_ENTER();
  return capture_info(per_thread(stream), status, id, graph, dependencies, nullptr, count);
}
SIMCUDA_EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo_v3(CUstream stream, CUstreamCaptureStatus* status, cuuint64_t* id,
                                                          CUgraph* graph, const CUgraphNode** dependencies,
                                                          const CUgraphEdgeData** edge_data, size_t* count) {
  SIMCUDA_DRIVER_ENTER();
  return capture_info(stream, status, id, graph, dependencies, edge_data, count);
}
SIMCUDA_EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo_v3_ptsz(CUstream stream, CUstreamCaptureStatus* status,
                                                               cuuint64_t* id, CUgraph* graph,
                                                               const CUgraphNode** dependencies,
                                                               const CUgraphEdgeData** edge_data, size_t* count) {
  SIMCUDA_DRIVER_ENTER();
  return capture_info(per_thread(stream), status, id, graph, dependencies, edge_data, count);
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

// ---- graphs and execs -----------------------------------------------------------------------

SIMCUDA_EXPORT CUresult CUDAAPI cuGraphInstantiate(CUgraphExec* exec, CUgraph graph, CUgraphNode* error_node,
                                                   char* log, size_t log_bytes) {
  SIMCUDA_DRIVER_ENTER();
  return instantiate_with_log(exec, graph, error_node, log, log_bytes);
}
SIMCUDA_EXPORT CUresult CUDAAPI cuGraphInstantiate_v2(CUgraphExec* exec, CUgraph graph, CUgraphNode* error_node,
                                                      char* log, size_t log_bytes) {
  SIMCUDA_DRIVER_ENTER();
  return instantiate_with_log(exec, graph, error_node, log, log_bytes);
}
// Flags (auto-free on launch, upload, device launch, priorities) change nothing here.
SIMCUDA_EXPORT CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long) {
  SIMCUDA_DRIVER_ENTER();
  return instantiate(exec, graph);
}
SIMCUDA_EXPORT CUresult CUDAAPI cuGraphInstantiateWithParams(CUgraphExec* exec, CUgraph graph,
                                                             CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  SIMCUDA_DRIVER_ENTER();
  return instantiate_with_params(exec, graph, params);
}
SIMCUDA_EXPORT CUresult CUDAAPI cuGraphInstantiateWithParams_ptsz(CUgraphExec* exec, CUgraph graph,
                                                                  CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  SIMCUDA_DRIVER_ENTER();
  return instantiate_with_params(exec, graph, params);
}

SIMCUDA_EXPORT CUresult CUDAAPI cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  SIMCUDA_DRIVER_ENTER();
  return launch(exec, stream);
}
SIMCUDA_EXPORT CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream) {
  SIMCUDA_DRIVER_ENTER();
  return launch(exec, per_thread(stream));
}

SIMCUDA_EXPORT CUresult CUDAAPI cuGraphUpload(CUgraphExec exec, CUstream stream) {
  SIMCUDA_DRIVER_ENTER();
  return upload(exec, stream);
}
SIMCUDA_EXPORT CUresult CUDAAPI cuGraphUpload_ptsz(CUgraphExec exec, CUstream stream) {
  SIMCUDA_DRIVER_ENTER();
  return upload(exec, per_thread(stream));
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

// Nodes are the recorded operations; their handles serve only to count and to compare with
// cuStreamGetCaptureInfo's dependencies (simcuda has no node API).
SIMCUDA_EXPORT CUresult CUDAAPI cuGraphGetNodes(CUgraph graph, CUgraphNode* nodes, size_t* count) {
  SIMCUDA_DRIVER_ENTER();
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  Graph* found = resolve_graph_locked(graph);
  if (found == nullptr) found = resolve_capturing_graph_locked(graph);
  if (found == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (nodes == nullptr) {
    *count = found->nodes.size();
    return CUDA_SUCCESS;
  }
  const size_t filled = std::min(*count, found->nodes.size());
  for (size_t index = 0; index < filled; ++index) nodes[index] = reinterpret_cast<CUgraphNode>(&found->nodes[index]);
  *count = filled;
  return CUDA_SUCCESS;
}

// Writes the nodes and edges in Graphviz syntax; the flags' extra details are not written.
SIMCUDA_EXPORT CUresult CUDAAPI cuGraphDebugDotPrint(CUgraph graph, const char* path, unsigned int) {
  SIMCUDA_DRIVER_ENTER();
  if (path == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  Graph* found = resolve_graph_locked(graph);
  if (found == nullptr) found = resolve_capturing_graph_locked(graph);
  if (found == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return write_graph_dot_locked(*found, path);
}
