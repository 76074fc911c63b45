// Stream capture and CUDA graphs (see stream_capture.h).
//
// Note [Stream capture]
// cuStreamBeginCapture puts a created stream (never the legacy stream) into a capture
// sequence with a unique id. Work enqueued on a capturing stream -- kernels, copies,
// memsets, host functions, frees -- is recorded, not run: copies and memsets take effect
// at replay (Note [Copies take effect at enqueue] then applies to the replay). An event
// recorded on a capturing stream is captured: cuEventQuery/Synchronize on it fail with
// CUDA_ERROR_CAPTURED_EVENT (until it is recorded again outside a capture). A stream that
// waits on a captured event joins that capture (a fork); cuStreamEndCapture on the origin
// stream fails with CUDA_ERROR_STREAM_CAPTURE_UNJOINED unless the origin waited on an
// event recorded on every forked stream after its last captured op (the join). A capturing
// stream that waits on an event from outside its capture breaks isolation
// (CUDA_ERROR_STREAM_CAPTURE_ISOLATION, capture invalidated). Querying or synchronizing a
// capturing stream is unsupported and invalidates its capture.
// Potentially unsafe calls follow cuThreadExchangeStreamCaptureMode's rules: a thread in
// relaxed mode may make them; otherwise they are prohibited while the thread itself has a
// capture not begun in relaxed mode, or -- for a thread in global mode -- while any other
// thread has a global-mode capture. A prohibited call returns
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates those captures (cuStreamEndCapture
// then returns CUDA_ERROR_STREAM_CAPTURE_INVALIDATED and no graph). simcuda treats as
// unsafe: cuMemAlloc/cuMemFree (cudaMalloc/cudaFree), context, stream and event
// synchronization and queries, synchronous copies, and -- conservatively, where the CUDA
// documentation is silent -- the virtual memory calls cuMemCreate, cuMemRelease,
// cuMemAddressReserve/Free, cuMemMap/Unmap and cuMemSetAccess.
// Not emulated: the legacy stream's implicit synchronization with capturing streams
// (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT), graph node APIs beyond counting, and capture into an
// existing graph.
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
  std::thread::id thread;
  bool invalidated = false;
  Graph graph;
  std::vector<Stream*> streams;                   // origin first, then forks
  std::unordered_map<Stream*, size_t> op_counts;  // captured ops per stream
  std::unordered_map<Stream*, bool> joined;       // forks: joined back since their last op
};

namespace {

// All under the state lock.
std::vector<std::unique_ptr<Capture>>& captures() {
  static std::vector<std::unique_ptr<Capture>> live;
  return live;
}
std::unordered_map<void*, std::unique_ptr<Graph>>& graphs() {
  static std::unordered_map<void*, std::unique_ptr<Graph>> made;
  return made;
}
std::unordered_map<void*, std::unique_ptr<Graph>>& execs() {
  static std::unordered_map<void*, std::unique_ptr<Graph>> made;
  return made;
}
uint64_t next_capture_id = 1;
thread_local CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

Capture* capture_by_id_locked(uint64_t id) {
  for (const auto& capture : captures())
    if (capture->id == id) return capture.get();
  return nullptr;
}

}  // namespace

bool capture_op_locked(Stream& stream, std::vector<Access>& accesses, std::function<void()>& on_complete,
                       std::function<bool()> effect, const std::string& what, size_t modelled_bytes) {
  Capture* capture = stream.capture;
  if (capture == nullptr) return false;
  capture->graph.ops.push_back(
      CapturedOp{std::move(accesses), std::move(on_complete), std::move(effect), what, modelled_bytes});
  ++capture->op_counts[&stream];
  if (&stream != capture->origin) capture->joined[&stream] = false;
  return true;
}

CUresult check_unsafe_call_locked() {
  if (thread_mode == CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_SUCCESS;
  const std::thread::id self = std::this_thread::get_id();
  bool prohibited = false;
  for (const auto& capture : captures()) {
    const bool own = capture->thread == self;
    const bool forbids = own ? capture->mode != CU_STREAM_CAPTURE_MODE_RELAXED
                             : capture->mode == CU_STREAM_CAPTURE_MODE_GLOBAL &&
                                   thread_mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
    if (!forbids) continue;
    capture->invalidated = true;
    prohibited = true;
  }
  return prohibited ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

CUresult check_event_not_captured_locked(const Event& event) {
  return event.captured_in != 0 ? CUDA_ERROR_CAPTURED_EVENT : CUDA_SUCCESS;
}

CUresult check_stream_not_capturing_locked(Stream& stream) {
  if (stream.capture == nullptr) return CUDA_SUCCESS;
  stream.capture->invalidated = true;
  return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

void note_event_record_locked(Event& event, Stream& stream) {
  Capture* capture = stream.capture;
  if (capture == nullptr) {
    event.captured_in = 0;
    event.captured_on = nullptr;
    return;
  }
  event.recorded = true;
  event.captured_in = capture->id;
  event.captured_on = &stream;
  event.captured_after = capture->op_counts[&stream];
}

CUresult capture_wait_locked(Stream& stream, const Event& event) {
  Capture* from = event.captured_in != 0 ? capture_by_id_locked(event.captured_in) : nullptr;
  if (event.captured_in != 0 && from == nullptr) return CUDA_ERROR_CAPTURED_EVENT;  // its capture ended
  Capture* into = stream.capture;
  if (into != nullptr) {
    if (from != into) {  // waiting on work outside the capture
      into->invalidated = true;
      return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
    }
    if (&stream == into->origin && event.captured_on != into->origin &&
        event.captured_after == into->op_counts[event.captured_on])
      into->joined[event.captured_on] = true;
    return CUDA_SUCCESS;
  }
  if (from != nullptr) {  // a fork: the stream joins the capture
    stream.capture = from;
    from->streams.push_back(&stream);
    from->joined[&stream] = false;
  }
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
  bool all_joined = true;
  for (const auto& [fork, joined] : capture->joined) all_joined = all_joined && joined;
  CUresult result = CUDA_SUCCESS;
  if (capture->invalidated) {
    result = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  } else if (!all_joined) {
    result = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
  } else {
    auto made = std::make_unique<Graph>(std::move(capture->graph));
    *graph = made.get();
    graphs().emplace(static_cast<void*>(made.get()), std::move(made));
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

CUstreamCaptureMode exchange_thread_capture_mode(CUstreamCaptureMode mode) {
  const CUstreamCaptureMode previous = thread_mode;
  thread_mode = mode;
  return previous;
}

Graph* resolve_graph_locked(void* handle) {
  auto found = graphs().find(handle);
  return found == graphs().end() ? nullptr : found->second.get();
}

Graph* instantiate_graph_locked(const Graph& graph) {
  auto made = std::make_unique<Graph>(graph);
  Graph* exec = made.get();
  execs().emplace(static_cast<void*>(exec), std::move(made));
  return exec;
}

Graph* resolve_exec_locked(void* handle) {
  auto found = execs().find(handle);
  return found == execs().end() ? nullptr : found->second.get();
}

bool destroy_graph_locked(void* handle) { return graphs().erase(handle) == 1; }
bool destroy_exec_locked(void* handle) { return execs().erase(handle) == 1; }

CUresult launch_graph_locked(const Graph& exec, Stream& stream) {
  CUresult result = CUDA_SUCCESS;
  for (const CapturedOp& op : exec.ops) {
    std::vector<Access> accesses = op.accesses;
    std::function<void()> on_complete = op.on_complete;
    if (capture_op_locked(stream, accesses, on_complete, op.effect, op.what, op.modelled_bytes)) continue;
    launch_locked(stream, std::move(accesses), std::move(on_complete), op.what, op.modelled_bytes);
    if (op.effect && !op.effect()) result = CUDA_ERROR_INVALID_VALUE;
  }
  return result;
}

}  // namespace simcuda
