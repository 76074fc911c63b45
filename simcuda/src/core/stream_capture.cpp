// Stream capture: capture sequences and the rules of the CUDA documentation (see
// stream_capture.h; replay is Note [Graph replay] in graphs.cpp).
//
// Note [Stream capture]
// Begin: cuStreamBeginCapture puts a created or per-thread stream (never the legacy stream:
//   CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; not one already capturing: CUDA_ERROR_ILLEGAL_STATE)
//   into a new capture sequence with a process-unique id (1, 2, 3, ...).
// Recording: work enqueued on a capturing stream -- simulated kernels, cuLaunchKernel, async
//   copies and memsets, stream write-value, host functions, graph launches -- becomes a graph
//   node and does not run; each node depends on the stream's current dependency set (its
//   previous node, plus what it joined). Copies and memsets check their ranges at capture and
//   move bytes only at replay. simcuda does not capture stream-ordered allocation
//   (cuMemAllocAsync/FreeAsync: graph memory nodes) nor cuStreamAddCallback (documented as
//   unsupported in capture): on a capturing stream they fail with
//   CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidate the capture.
// Events: recording an event on a capturing stream makes it a captured event: it names the
//   stream's dependency set, and cuEventQuery/Synchronize/ElapsedTime on it fail with
//   CUDA_ERROR_CAPTURED_EVENT in every mode, until it is recorded outside a capture.
//   CU_EVENT_RECORD_EXTERNAL / CU_EVENT_WAIT_EXTERNAL make event record / wait nodes (replayed
//   on the launch stream); outside a capture those flags are CUDA_ERROR_INVALID_VALUE.
// Fork and join: a stream that waits on an event captured in a live capture joins that
//   capture (a fork; its next node depends on the event's nodes). A capturing stream waiting on
//   an event of its own capture adds the event's nodes to its dependencies (a join). A
//   capturing stream waiting on anything else (an ordinary event, another capture's event)
//   would cross the capture boundary: CUDA_ERROR_STREAM_CAPTURE_ISOLATION, invalidating.
// End: only on the origin stream (else CUDA_ERROR_STREAM_CAPTURE_UNMATCHED; not capturing:
//   CUDA_ERROR_ILLEGAL_STATE), from the beginning thread unless the capture is relaxed
//   (CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD). Every stream of the capture leaves it. An
//   invalidated capture gives CUDA_ERROR_STREAM_CAPTURE_INVALIDATED and no graph; a capture
//   with a node that the origin's dependency set does not reach (a fork whose work was not
//   joined back) gives CUDA_ERROR_STREAM_CAPTURE_UNJOINED and no graph.
// Streams: querying or synchronizing a capturing stream, or asking its device
//   (cuStreamGetDevice: a real driver refused cudaStreamGetDevice on a stream capturing in
//   global mode; simcuda refuses it in every mode), fails with
//   CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates its capture, in every mode;
//   destroying a stream of a live capture is refused the same way (conservative: the
//   documentation is silent).
// Unsafe calls (by the calling thread's own mode, set with cuThreadExchangeStreamCaptureMode
//   and global until changed, and the mode each capture was begun with): a thread in relaxed
//   mode may make them; a thread in thread-local or global mode may not while
//   it has a capture of its own not begun in relaxed mode; a thread in global mode may not while
//   any other thread has a global-mode capture. A prohibited call fails with
//   CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the captures that prohibit it.
//   simcuda treats as unsafe: cuMemAlloc/cuMemFree (cudaMalloc/cudaFree), pinned host memory
//   (cuMemAllocHost, cuMemHostAlloc, cuMemFreeHost, cuMemHostRegister/Unregister),
//   cuCtxSynchronize (cudaDeviceSynchronize), stream and event synchronization and queries,
//   synchronous copies and memsets, and -- conservatively, where the documentation is silent --
//   the virtual memory calls cuMemCreate, cuMemRelease, cuMemAddressReserve/Free, cuMemMap/
//   Unmap and cuMemSetAccess.
// Legacy stream: while a blocking stream (created without CU_STREAM_NON_BLOCKING, or a
//   per-thread stream) of a device takes part in a capture, the device's legacy stream cannot
//   be used -- it would depend implicitly on the capturing stream: work, event records and
//   waits, synchronous copies, queries and synchronization on it fail with
//   CUDA_ERROR_STREAM_CAPTURE_IMPLICIT and invalidate those captures; cuStreamIsCapturing and
//   cuStreamGetCaptureInfo on it answer CUDA_ERROR_STREAM_CAPTURE_IMPLICIT without
//   invalidating. The documentation ties this to the stream's flags, not the capture mode.
// Not emulated: capture into an existing graph, cuStreamUpdateCaptureDependencies, graph
// memory nodes, graph node APIs beyond counting and printing.
#include "stream_capture.h"

#include <algorithm>
#include <memory>
#include <thread>
#include <unordered_map>

#include "pending_work.h"

namespace simcuda {

struct Capture {
  uint64_t id = 0;
  Stream* origin = nullptr;
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  std::thread::id thread;  // the beginning thread
  bool invalidated = false;
  std::unique_ptr<Graph> graph = std::make_unique<Graph>();  // its address is the graph handle
  std::vector<Stream*> streams;                               // origin first, then forks
  std::unordered_map<const Stream*, std::vector<size_t>> dependencies;  // of each stream's next node
  std::vector<CUgraphNode> dependency_view;                   // cuStreamGetCaptureInfo's arrays
  std::vector<CUgraphEdgeData> edge_view;
};

namespace {

// Under the state lock.
std::vector<std::unique_ptr<Capture>>& captures() {
  static std::vector<std::unique_ptr<Capture>> live;
  return live;
}
uint64_t next_capture_id = 1;
thread_local CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

Capture* capture_by_id_locked(uint64_t id) {
  for (const auto& capture : captures())
    if (capture->id == id) return capture.get();
  return nullptr;
}

CUresult invalidate(Capture& capture, CUresult error) {
  capture.invalidated = true;
  return error;
}

void add_dependencies(std::vector<size_t>& into, const std::vector<size_t>& more) {
  for (size_t node : more)
    if (std::find(into.begin(), into.end(), node) == into.end()) into.push_back(node);
}

// Note [Stream capture]: joined when every node is an ancestor of (or in) the origin's set.
bool all_joined(const Capture& capture) {
  const auto& nodes = capture.graph->nodes;
  std::vector<bool> reached(nodes.size(), false);
  auto origin = capture.dependencies.find(capture.origin);
  std::vector<size_t> pending = origin == capture.dependencies.end() ? std::vector<size_t>{} : origin->second;
  while (!pending.empty()) {
    const size_t node = pending.back();
    pending.pop_back();
    if (reached[node]) continue;
    reached[node] = true;
    for (size_t dependency : nodes[node].dependencies) pending.push_back(dependency);
  }
  return std::all_of(reached.begin(), reached.end(), [](bool yes) { return yes; });
}

}  // namespace

bool capture_node_locked(Stream& stream, GraphNode node) {
  Capture* capture = stream.capture;
  if (capture == nullptr) return false;
  std::vector<size_t>& dependencies = capture->dependencies[&stream];
  node.dependencies = dependencies;
  capture->graph->nodes.push_back(std::move(node));
  dependencies.assign(1, capture->graph->nodes.size() - 1);
  return true;
}

bool capture_op_locked(Stream& stream, std::vector<Access>& accesses, std::function<void()>& on_complete,
                       std::function<bool()> effect, const std::string& what, size_t modelled_bytes) {
  if (stream.capture == nullptr) return false;
  GraphNode node;
  node.what = what;
  node.accesses = std::move(accesses);
  node.modelled_bytes = modelled_bytes;
  node.on_complete = std::move(on_complete);
  node.effect = std::move(effect);
  return capture_node_locked(stream, std::move(node));
}

CUresult check_unsafe_call_locked() {
  if (thread_mode == CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_SUCCESS;
  const std::thread::id self = std::this_thread::get_id();
  CUresult result = CUDA_SUCCESS;
  for (const auto& capture : captures()) {
    const bool prohibits = capture->thread == self ? capture->mode != CU_STREAM_CAPTURE_MODE_RELAXED
                                                   : capture->mode == CU_STREAM_CAPTURE_MODE_GLOBAL &&
                                                         thread_mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
    if (prohibits) result = invalidate(*capture, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  }
  return result;
}

CUresult check_event_not_captured_locked(const Event& event) {
  return event.captured_in != 0 ? CUDA_ERROR_CAPTURED_EVENT : CUDA_SUCCESS;
}

CUresult check_stream_not_capturing_locked(Stream& stream) {
  if (stream.capture == nullptr) return CUDA_SUCCESS;
  return invalidate(*stream.capture, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
}

CUresult check_legacy_stream_use_locked(const Stream& stream, bool invalidates) {
  if (stream.kind != StreamKind::legacy) return CUDA_SUCCESS;
  CUresult result = CUDA_SUCCESS;
  for (const auto& capture : captures()) {
    const bool blocking_member = std::any_of(capture->streams.begin(), capture->streams.end(), [&](const Stream* member) {
      return member->device == stream.device && member->blocking();
    });
    if (!blocking_member) continue;
    result = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    if (invalidates) capture->invalidated = true;
  }
  return result;
}

CUresult refuse_uncapturable_locked(Stream& stream) {
  if (stream.capture == nullptr) return CUDA_SUCCESS;
  return invalidate(*stream.capture, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
}

CUresult check_stream_destroyable_locked(Stream& stream) { return refuse_uncapturable_locked(stream); }

void note_event_record_locked(Event& event, Stream& stream) {
  Capture* capture = stream.capture;
  if (capture == nullptr) {
    event.captured_in = 0;
    event.captured_nodes.clear();
    return;
  }
  event.recorded = true;
  event.captured_in = capture->id;
  event.captured_nodes = capture->dependencies[&stream];
}

CUresult capture_external_record_locked(Event& event, Stream& stream) {
  if (stream.capture == nullptr) return CUDA_ERROR_INVALID_VALUE;
  GraphNode node;
  node.what = "eventRecord";
  node.at_replay = [handle = static_cast<void*>(&event)](Stream& launch) {
    if (Event* alive = resolve_event_locked(handle)) record_event_locked(*alive, launch);
  };
  capture_node_locked(stream, std::move(node));
  note_event_record_locked(event, stream);
  return CUDA_SUCCESS;
}

CUresult capture_wait_locked(Stream& stream, Event& event, bool external, bool* ordinary) {
  *ordinary = false;
  Capture* into = stream.capture;
  if (external) {
    if (into == nullptr) return CUDA_ERROR_INVALID_VALUE;
    GraphNode node;
    node.what = "eventWait";
    node.at_replay = [handle = static_cast<void*>(&event)](Stream& launch) {
      if (Event* alive = resolve_event_locked(handle)) wait_event_locked(launch, *alive);
    };
    capture_node_locked(stream, std::move(node));
    return CUDA_SUCCESS;
  }
  Capture* from = event.captured_in != 0 ? capture_by_id_locked(event.captured_in) : nullptr;
  if (into != nullptr) {
    if (from != into) {  // the dependency would cross the capture's boundary
      if (from != nullptr) from->invalidated = true;
      return invalidate(*into, CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
    }
    add_dependencies(into->dependencies[&stream], event.captured_nodes);  // a join
    return CUDA_SUCCESS;
  }
  if (event.captured_in != 0 && from == nullptr) return CUDA_ERROR_CAPTURED_EVENT;  // its capture ended
  if (from == nullptr) {
    *ordinary = true;
    return CUDA_SUCCESS;
  }
  if (stream.kind == StreamKind::legacy) return invalidate(*from, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  stream.capture = from;  // a fork
  from->streams.push_back(&stream);
  from->dependencies[&stream] = event.captured_nodes;
  return CUDA_SUCCESS;
}

CUresult begin_capture_locked(Stream& stream, CUstreamCaptureMode mode) {
  if (stream.kind == StreamKind::legacy) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (stream.capture != nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      mode != CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  auto capture = std::make_unique<Capture>();
  capture->id = next_capture_id++;
  capture->origin = &stream;
  capture->mode = mode;
  capture->thread = std::this_thread::get_id();
  capture->streams.push_back(&stream);
  capture->dependencies[&stream] = {};
  stream.capture = capture.get();
  captures().push_back(std::move(capture));
  return CUDA_SUCCESS;
}

CUresult end_capture_locked(Stream& stream, Graph** graph) {
  *graph = nullptr;
  Capture* capture = stream.capture;
  if (capture == nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  if (capture->origin != &stream) return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
  if (capture->mode != CU_STREAM_CAPTURE_MODE_RELAXED && capture->thread != std::this_thread::get_id())
    return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  for (Stream* member : capture->streams) member->capture = nullptr;
  CUresult result = CUDA_SUCCESS;
  if (capture->invalidated) {
    result = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  } else if (!all_joined(*capture)) {
    result = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
  } else {
    *graph = register_graph_locked(std::move(capture->graph));
  }
  auto& live = captures();
  live.erase(std::find_if(live.begin(), live.end(), [&](const auto& one) { return one.get() == capture; }));
  return result;
}

CUstreamCaptureStatus capture_status_locked(const Stream& stream, uint64_t* id) {
  if (stream.capture == nullptr) {
    if (id != nullptr) *id = 0;
    return CU_STREAM_CAPTURE_STATUS_NONE;
  }
  if (id != nullptr) *id = stream.capture->id;
  return stream.capture->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE;
}

void capture_info_locked(const Stream& stream, CUstreamCaptureStatus* status, uint64_t* id, Graph** graph,
                         const CUgraphNode** dependencies, const CUgraphEdgeData** edge_data, size_t* count) {
  *status = capture_status_locked(stream, id);
  Capture* capture = stream.capture;
  if (graph != nullptr) *graph = capture != nullptr ? capture->graph.get() : nullptr;
  if (capture != nullptr) {
    capture->dependency_view.clear();
    for (size_t node : capture->dependencies[&stream])
      capture->dependency_view.push_back(reinterpret_cast<CUgraphNode>(&capture->graph->nodes[node]));
    capture->edge_view.assign(capture->dependency_view.size(), CUgraphEdgeData{});
  }
  if (dependencies != nullptr) *dependencies = capture != nullptr ? capture->dependency_view.data() : nullptr;
  if (edge_data != nullptr) *edge_data = capture != nullptr ? capture->edge_view.data() : nullptr;
  if (count != nullptr) *count = capture != nullptr ? capture->dependency_view.size() : 0;
}

Graph* resolve_capturing_graph_locked(void* handle) {
  for (const auto& capture : captures())
    if (static_cast<void*>(capture->graph.get()) == handle) return capture->graph.get();
  return nullptr;
}

CUstreamCaptureMode exchange_thread_capture_mode(CUstreamCaptureMode mode) {
  const CUstreamCaptureMode previous = thread_mode;
  thread_mode = mode;
  return previous;
}

}  // namespace simcuda
