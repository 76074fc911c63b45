// Stream capture (Note [Stream capture] in stream_capture.cpp): capture sequences, what
// work enqueued on a capturing stream becomes, and the rules for calls made while one runs.
// Invariant (state lock held): a stream belongs to at most one live capture and then points
// at it; every stream a capture lists points back at it; work enqueued on a capturing stream
// becomes a node of the capture's graph and runs only when an exec made from it is launched.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "device_state.h"
#include "graphs.h"

namespace simcuda {

// Records `node` if `stream` is capturing, after the stream's current dependencies; false
// (nothing done) otherwise.
bool capture_node_locked(Stream& stream, GraphNode node);
// The same for what launch_locked enqueues (moved from only when recorded).
bool capture_op_locked(Stream& stream, std::vector<Access>& accesses, std::function<void()>& on_complete,
                       std::function<bool()> effect, const std::string& what, size_t modelled_bytes);

// ---- rules (each returns CUDA_SUCCESS when the call may go on) ---------------------------
// A potentially unsafe call (cudaMalloc, synchronization, synchronous copies, ...) made by
// this thread: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, invalidating the captures that
// prohibit it under the thread-mode rules.
CUresult check_unsafe_call_locked();
// cuEventQuery/Synchronize/ElapsedTime: CUDA_ERROR_CAPTURED_EVENT for an event last
// recorded inside a capture.
CUresult check_event_not_captured_locked(const Event& event);
// Querying or synchronizing a capturing stream: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
// invalidating its capture.
CUresult check_stream_not_capturing_locked(Stream& stream);
// Any use of the legacy stream while a blocking stream of its device captures:
// CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, invalidating those captures when `invalidates`.
CUresult check_legacy_stream_use_locked(const Stream& stream, bool invalidates);
// Work simcuda does not capture (stream-ordered allocation, cuStreamAddCallback) enqueued on
// a capturing stream: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, invalidating the capture.
CUresult refuse_uncapturable_locked(Stream& stream);
// cuStreamDestroy of a stream taking part in a capture: refused like an unsupported call.
CUresult check_stream_destroyable_locked(Stream& stream);

// ---- events -------------------------------------------------------------------------------
// cuEventRecord: on a capturing stream the event becomes captured (it then names the
// stream's current dependencies); elsewhere it stops being captured.
void note_event_record_locked(Event& event, Stream& stream);
// cuEventRecordWithFlags(CU_EVENT_RECORD_EXTERNAL): an event record node, recorded at replay.
CUresult capture_external_record_locked(Event& event, Stream& stream);
// cuStreamWaitEvent: a fork (the stream joins the event's capture), a join, an external
// wait node, an isolation violation, or -- `*ordinary` set -- a plain wait for the caller.
CUresult capture_wait_locked(Stream& stream, Event& event, bool external, bool* ordinary);

// ---- capture sequences --------------------------------------------------------------------
CUresult begin_capture_locked(Stream& stream, CUstreamCaptureMode mode);
// On success *graph is the captured graph, now registered (graphs.h); otherwise nullptr.
CUresult end_capture_locked(Stream& stream, Graph** graph);
// Status and id (0 when none) of the stream's capture.
CUstreamCaptureStatus capture_status_locked(const Stream& stream, uint64_t* id);
// cuStreamGetCaptureInfo: status, id, the graph being built and the nodes the stream's next
// node will depend on (arrays valid until the next call on the stream's capture).
void capture_info_locked(const Stream& stream, CUstreamCaptureStatus* status, uint64_t* id, Graph** graph,
                         const CUgraphNode** dependencies, const CUgraphEdgeData** edge_data, size_t* count);
// The graph a live capture is building, by handle (nullptr if none).
Graph* resolve_capturing_graph_locked(void* handle);
CUstreamCaptureMode exchange_thread_capture_mode(CUstreamCaptureMode mode);

}  // namespace simcuda
