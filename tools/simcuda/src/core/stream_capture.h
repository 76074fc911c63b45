// Stream capture and CUDA graphs (Note [Stream capture] in stream_capture.cpp): capture
// sequences, the graphs they produce, replay, and the rules for calls made while one runs.
// Invariant (state lock held): a stream belongs to at most one live capture; a capture's
// streams all point at it; work enqueued on a capturing stream runs only when a graph made
// from it is launched.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "device_state.h"

namespace simcuda {

// One recorded op: what launch_locked would have enqueued, plus the data effect a copy or
// memset has when it is enqueued (Note [Copies take effect at enqueue]).
struct CapturedOp {
  std::vector<Access> accesses;
  std::function<void()> on_complete;
  std::function<bool()> effect;  // false: a range was not accessible at replay
  std::string what;
  size_t modelled_bytes = 0;
};

struct Graph {
  std::vector<CapturedOp> ops;
};

// Records the op if `stream` is capturing; false (nothing done) otherwise.
bool capture_op_locked(Stream& stream, std::vector<Access>& accesses, std::function<void()>& on_complete,
                       std::function<bool()> effect, const std::string& what, size_t modelled_bytes);
// A potentially unsafe call (cudaMalloc, synchronization, event queries, frees...) made by
// this thread: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, invalidating the captures that forbid
// it, or CUDA_SUCCESS.
CUresult check_unsafe_call_locked();
// Event rules: CUDA_ERROR_CAPTURED_EVENT for an event last recorded in a capture.
CUresult check_event_not_captured_locked(const Event& event);
// Stream rules: querying or synchronizing a capturing stream is unsupported (and
// invalidates its capture).
CUresult check_stream_not_capturing_locked(Stream& stream);
// cuEventRecord on a capturing stream marks the event captured.
void note_event_record_locked(Event& event, Stream& stream);
// cuStreamWaitEvent: joins `stream` to the event's capture, or reports an isolation
// violation (a capturing stream waiting on an event from outside its capture).
CUresult capture_wait_locked(Stream& stream, const Event& event);

CUresult begin_capture_locked(Stream& stream, CUstreamCaptureMode mode);
CUresult end_capture_locked(Stream& stream, Graph** graph);
// Status and id of the stream's capture (id 0 when none).
CUstreamCaptureStatus capture_status_locked(const Stream& stream, uint64_t* id);
CUstreamCaptureMode exchange_thread_capture_mode(CUstreamCaptureMode mode);

// Graph objects (handles are the pointers).
Graph* resolve_graph_locked(void* handle);
Graph* instantiate_graph_locked(const Graph& graph);  // an exec: a copy of the ops
Graph* resolve_exec_locked(void* handle);
bool destroy_graph_locked(void* handle);
bool destroy_exec_locked(void* handle);
// Enqueues the exec's ops on `stream` as if enqueued now.
CUresult launch_graph_locked(const Graph& exec, Stream& stream);

}  // namespace simcuda
