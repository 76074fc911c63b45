// Streams, events and the pending-work model (Notes [Vector clocks], [Legacy default
// stream], [Simulated time] in pending_work.cpp).
// Invariant: an op completes only after every op it depends on (its own stream's earlier
// ops and the other streams' ops in its clock) has completed.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "device_state.h"

namespace simcuda {

// Handles: nullptr / CU_STREAM_LEGACY = the current device's legacy stream,
// CU_STREAM_PER_THREAD = this thread's per-thread stream, else a created stream. nullptr if unknown.
Stream* resolve_stream_locked(void* handle);
Stream* create_stream_locked(int device, unsigned flags, int priority);
// Completes the stream's pending work, then forgets it (refused while the stream takes part in
// a capture: Note [Stream capture]).
CUresult destroy_stream_locked(void* handle);

// Enqueues an op on `stream`, checks it with the race oracle, returns its kernel id.
// `modelled_bytes` adds to its simulated duration.
uint64_t launch_locked(Stream& stream, std::vector<Access> accesses, std::function<void()> on_complete,
                       std::string what, size_t modelled_bytes);
void complete_through_locked(Stream& stream, uint64_t sequence);
// cudaStreamSynchronize: completes the stream's ops and the other streams' work it waits on
// (an event wait is work of the stream even when no op follows it).
void synchronize_stream_locked(Stream& stream);
// cudaStreamQuery: no pending op on the stream and none of the work it waits on is pending.
bool stream_idle_locked(const Stream& stream);
size_t advance_locked(Stream& stream, size_t count);
void complete_device_locked(int device);
void complete_all_locked();
size_t pending_count_locked();

Event* resolve_event_locked(void* handle);
void record_event_locked(Event& event, Stream& stream);
bool event_complete_locked(const Event& event);
void synchronize_event_locked(const Event& event);
void wait_event_locked(Stream& stream, const Event& event);

}  // namespace simcuda
