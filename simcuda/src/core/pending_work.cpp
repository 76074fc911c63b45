// Streams, events and pending simulated work; see pending_work.h.
//
// Note [Vector clocks]
// Every stream numbers its ops 1, 2, 3, ... (`launched`, `completed`). A stream's `waits`
// clock maps other streams' ids to the sequence number it is ordered after. An op captures
// its stream's clock at launch (its `dependencies`). Recording an event captures the
// stream's clock plus {stream: launched}; cudaStreamWaitEvent merges the event's clock into
// the waiting stream's (element-wise max). Because a clock includes everything its stream
// waited for, ordering is transitive. An op is ordered after op P of stream T exactly when
// dependencies[T] >= P.sequence; that is all the race oracle needs.
//
// Note [Legacy default stream]
// Stream 0 / cudaStreamLegacy is the per-device legacy stream. As documented, an op on it
// waits for all earlier work of the device's blocking streams, and an op on a blocking
// stream waits for earlier work of the legacy stream; non-blocking streams
// (cudaStreamNonBlocking) take no part. We apply this at every launch, event record and
// event wait by merging clocks. cudaStreamPerThread is one blocking stream per thread and
// device (so it too synchronizes with the legacy stream, as the documentation says).
//
// Note [Destroyed streams]
// As with CUDA, cudaStreamDestroy returns at once and the stream's queued work still runs to
// completion later: it stays pending (completed by simcuda_advance of other streams' waits,
// device synchronization, cudaFree, or events recorded before the destroy), and the race
// oracle still checks other streams' work against it. The handle is dead at once (calls
// with it fail with an invalid handle) and, as CUDA may, is handed to the next stream
// created: the pending state moves to a Stream object of its own, found only by id, and the
// object at the handle's address is kept for reuse, newest first -- deterministically, so a
// test of handle reuse does not depend on the host allocator (a sanitizer's quarantine
// never hands freed memory back at once). Destroyed streams with no pending work left are
// dropped at the next destroy.
//
// Note [Simulated time]
// Each op occupies its stream for SIMCUDA_KERNEL_NS (default 1000 ns) plus 1 ns per KiB it
// touches, starting when its stream and its dependencies are done. Events record that
// simulated time, so cudaEventElapsedTime is positive across launched work. No host time
// is involved: the numbers are a model, not a measurement.
//
// Note [Bounded pending work]
// A program that never synchronizes would queue ops forever (and make every launch's race
// check slower). Like a real device that makes progress on its own, a stream holding more
// than kMaxPendingPerStream ops completes its oldest one at the next launch. Tests hold a
// handful of ops; benchmarks should turn on auto-complete (SIMCUDA_AUTO_COMPLETE=1).
#include "pending_work.h"

#include "stream_capture.h"

#include <algorithm>

#include "race_oracle.h"

namespace simcuda {
namespace {

thread_local std::vector<Stream*> t_per_thread_streams;  // by device
constexpr size_t kMaxPendingPerStream = 4096;            // Note [Bounded pending work]

void merge_clock(VectorClock& into, const VectorClock& from) {
  for (const auto& [id, sequence] : from) {
    uint64_t& mine = into[id];
    mine = std::max(mine, sequence);
  }
}

void merge_stream(Stream& into, const Stream& from) {
  merge_clock(into.waits, from.waits);
  uint64_t& seen = into.waits[from.id];
  seen = std::max(seen, from.launched);
  into.ready_time_ns = std::max(into.ready_time_ns, from.ready_time_ns);
}

// Note [Legacy default stream]
void apply_implicit_sync_locked(Stream& stream) {
  State& self = state();
  if (stream.kind == StreamKind::legacy) {
    for (const auto& [id, other] : self.stream_by_id) {
      if (other != &stream && other->device == stream.device && other->blocking()) merge_stream(stream, *other);
    }
  } else if (stream.blocking()) {
    merge_stream(stream, *self.devices[static_cast<size_t>(stream.device)].legacy_stream);
  }
  stream.waits.erase(stream.id);
}

Stream* stream_by_id_locked(uint64_t id) {
  auto& by_id = state().stream_by_id;
  auto found = by_id.find(id);
  return found == by_id.end() ? nullptr : found->second;
}

}  // namespace

Stream* create_stream_locked(int device, unsigned flags, int priority) {
  State& self = state();
  std::unique_ptr<Stream> created;
  if (!self.reusable_stream_objects.empty()) {  // Note [Destroyed streams]: the newest handle
    created = std::move(self.reusable_stream_objects.back());
    self.reusable_stream_objects.pop_back();
    *created = Stream{};
  } else {
    created = std::make_unique<Stream>();
  }
  Stream* stream = created.get();
  stream->id = self.next_stream_id++;
  stream->device = device;
  stream->flags = flags;
  stream->priority = priority;
  self.stream_by_id[stream->id] = stream;
  self.streams.emplace(static_cast<void*>(stream), std::move(created));
  return stream;
}

Stream* resolve_stream_locked(void* handle) {
  State& self = state();
  int device = current_device();
  if (!valid_device_locked(device)) return nullptr;
  if (handle == nullptr || handle == CU_STREAM_LEGACY)
    return self.devices[static_cast<size_t>(device)].legacy_stream.get();
  if (handle == CU_STREAM_PER_THREAD) {
    if (t_per_thread_streams.size() <= static_cast<size_t>(device))
      t_per_thread_streams.resize(static_cast<size_t>(device) + 1, nullptr);
    Stream*& mine = t_per_thread_streams[static_cast<size_t>(device)];
    if (mine == nullptr) {
      mine = create_stream_locked(device, 0, 0);
      mine->kind = StreamKind::per_thread;
    }
    return mine;
  }
  auto found = self.streams.find(handle);
  return found == self.streams.end() ? nullptr : found->second.get();
}

CUresult destroy_stream_locked(void* handle) {
  State& self = state();
  auto found = self.streams.find(handle);
  if (handle == nullptr || found == self.streams.end() || found->second->kind != StreamKind::created)
    return CUDA_ERROR_INVALID_HANDLE;
  Stream& stream = *found->second;
  if (CUresult refused = check_stream_destroyable_locked(stream); refused != CUDA_SUCCESS) return refused;
  // Note [Destroyed streams]: forget those that finished, keep this one's work pending.
  std::erase_if(self.destroyed_streams, [&](const std::unique_ptr<Stream>& gone) {
    if (!gone->pending.empty()) return false;
    self.stream_by_id.erase(gone->id);
    return true;
  });
  if (stream.pending.empty()) {
    self.stream_by_id.erase(stream.id);
  } else {
    auto kept = std::make_unique<Stream>(std::move(stream));
    self.stream_by_id[kept->id] = kept.get();
    self.destroyed_streams.push_back(std::move(kept));
  }
  self.reusable_stream_objects.push_back(std::move(found->second));
  self.streams.erase(found);
  return CUDA_SUCCESS;
}

uint64_t launch_locked(Stream& stream, std::vector<Access> accesses, std::function<void()> on_complete,
                       std::string what, size_t modelled_bytes) {
  State& self = state();
  // Note [Stream capture]: recorded into the capture's graph (the id names the node), run at replay.
  if (capture_op_locked(stream, accesses, on_complete, nullptr, what, modelled_bytes)) return self.next_kernel_id++;
  apply_implicit_sync_locked(stream);
  PendingOp op;
  op.kernel_id = self.next_kernel_id++;
  op.sequence = ++stream.launched;
  op.accesses = std::move(accesses);
  op.dependencies = stream.waits;
  op.on_complete = std::move(on_complete);
  op.what = std::move(what);
  stream.ready_time_ns += self.kernel_ns + modelled_bytes / 1024;  // Note [Simulated time]
  op.end_time_ns = stream.ready_time_ns;
  check_launch_races_locked(stream, op);
  uint64_t kernel_id = op.kernel_id;
  stream.pending.push_back(std::move(op));
  if (self.auto_complete) complete_through_locked(stream, stream.launched);
  else if (stream.pending.size() > kMaxPendingPerStream) complete_through_locked(stream, stream.completed + 1);
  return kernel_id;
}

void complete_through_locked(Stream& stream, uint64_t sequence) {
  while (stream.completed < sequence && !stream.pending.empty()) {
    // Dependencies first; they were launched earlier, so this recursion ends.
    VectorClock dependencies = stream.pending.front().dependencies;
    for (const auto& [id, needed] : dependencies) {
      if (Stream* other = stream_by_id_locked(id); other != nullptr && other != &stream)
        complete_through_locked(*other, needed);
    }
    if (stream.pending.empty() || stream.completed >= sequence) break;
    PendingOp op = std::move(stream.pending.front());
    stream.pending.pop_front();
    stream.completed = op.sequence;
    if (op.on_complete) op.on_complete();
  }
}

void synchronize_stream_locked(Stream& stream) {
  const auto waits = stream.waits;  // completing may not change it, but do not iterate a live map
  for (const auto& [id, needed] : waits) {
    if (Stream* other = stream_by_id_locked(id); other != nullptr && other != &stream)
      complete_through_locked(*other, needed);
  }
  complete_through_locked(stream, stream.launched);
}

bool stream_idle_locked(const Stream& stream) {
  if (!stream.pending.empty()) return false;
  for (const auto& [id, needed] : stream.waits) {
    const Stream* other = stream_by_id_locked(id);
    if (other != nullptr && other != &stream && other->completed < needed) return false;
  }
  return true;
}

size_t advance_locked(Stream& stream, size_t count) {
  uint64_t before = stream.completed;
  uint64_t target = std::min<uint64_t>(stream.launched, stream.completed + count);
  complete_through_locked(stream, target);
  return static_cast<size_t>(stream.completed - before);
}

void complete_device_locked(int device) {
  for (const auto& [id, stream] : state().stream_by_id) {
    if (stream->device == device) complete_through_locked(*stream, stream->launched);
  }
}

void complete_all_locked() {
  for (const auto& [id, stream] : state().stream_by_id) complete_through_locked(*stream, stream->launched);
}

size_t pending_count_locked() {
  size_t total = 0;
  for (const auto& [id, stream] : state().stream_by_id) total += stream->pending.size();
  return total;
}

Event* resolve_event_locked(void* handle) {
  auto& events = state().events;
  auto found = events.find(handle);
  return found == events.end() ? nullptr : found->second.get();
}

void record_event_locked(Event& event, Stream& stream) {
  note_event_record_locked(event, stream);  // Note [Stream capture]
  if (stream.capture != nullptr) return;
  apply_implicit_sync_locked(stream);
  event.recorded = true;
  event.clock = stream.waits;
  event.clock[stream.id] = stream.launched;
  event.time_ns = stream.ready_time_ns;
}

bool event_complete_locked(const Event& event) {
  for (const auto& [id, needed] : event.clock) {
    Stream* stream = stream_by_id_locked(id);
    if (stream != nullptr && stream->completed < needed) return false;
  }
  return true;
}

void synchronize_event_locked(const Event& event) {
  for (const auto& [id, needed] : event.clock) {
    if (Stream* stream = stream_by_id_locked(id)) complete_through_locked(*stream, needed);
  }
}

void wait_event_locked(Stream& stream, const Event& event) {
  merge_clock(stream.waits, event.clock);
  stream.waits.erase(stream.id);
  stream.ready_time_ns = std::max(stream.ready_time_ns, event.time_ns);
}

}  // namespace simcuda
