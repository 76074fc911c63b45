// A per-device pool of CUDA events, so stream-ordered reuse never creates or destroys
// events on the normal path (and what a pending free keeps of the events it waits for:
// use_event, busy_streams), and the record of the waits already made between streams
// (Note [Standing waits]) and of each stream's latest recorded event (Note [Shared
// records]). Invariant: every event in the pool is idle (no caller holds it, and it is no
// stream's latest record); events are destroyed only by drain() or the destructor; a
// standing wait of stream T on stream S at tick t means T is ordered after every free made
// on S with tick <= t -- it waited on an event recorded on S after them, or on an event
// recorded after such a wait (Note [Transitive waits]) -- and T and S have not been retired
// since; a latest record of S at tick t is an event recorded on S after every free with
// tick <= t, not recorded again since, and the standing waits it carries are S's from
// before it was recorded.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/backend.hpp"
#include "core/stream_set.hpp"

namespace fragless::core {

// An event of the pool recorded on `stream`, a stream that used a block being freed
// (Note [Stream reuse]); a null event completes only with a device synchronization.
struct use_event {
  void* event;
  stream_id stream;
};

// The streams one scan of a pending list found busy (Note [Pending in stream order]). Holds
// the first 16; a scan that meets more asks the others' events as they come.
class busy_streams {
 public:
  bool contains(stream_id stream) const noexcept {
    for (std::size_t index = 0; index < count_; ++index)
      if (streams_[index] == stream) return true;
    return false;
  }
  void add(stream_id stream) noexcept {
    if (count_ < streams_.size()) streams_[count_++] = stream;
  }

 private:
  std::array<stream_id, 16> streams_{};
  std::size_t count_ = 0;
};

// Note [Standing waits]
// cudaStreamWaitEvent orders all later work of the waiting stream, not just the next
// kernel. So once stream T waited on an event recorded on stream S, every free made on S
// before that record is already behind T: reusing its memory on T needs no new event.
// Frees are stamped with a tick of the device's order clock when they reach the large
// pool (stream_set keeps, per stream, the latest tick of the frees a range holds); each
// wait records the clock's tick taken before its event was recorded. A reuse on T of a
// range S freed into at tick f waits only if T's standing wait on S is older than f.
// In a repeating step this turns one record and one wait per cross-stream reuse into
// about one per pair of streams and step. A stream's standing waits (as waiter and as
// source) are forgotten when it is retired (Note [Retired streams]), since a new stream
// may then get its handle. Ticks unknown (kUnknownTick) are never covered.
// A reuse asks about all its sources at once (uncovered_sources): one lock and one lookup
// of the waiter's standing waits, where asking source by source took the lock and looked
// the waiter up for each. In a many-stream loop most sources are covered: corpus
// many-streams seed 11 asked about 4,600 sources a step for 508 allocations and waited
// on 841 of them.

// Note [Shared records]
// A wait that no standing wait covers needs an event recorded on the source stream after
// the free. Such an event serves every later wait on that stream for a free made before
// it, whichever stream waits: so the latest event recorded on each stream is kept (out of
// the pool) with its tick, and a wait it covers waits on it without a new record. In a
// many-stream loop several streams reuse what one stream freed, in turn; corpus
// many-streams seed 3 recorded an event for each of its 2,842 waits per step, and 82 % of
// them were covered by an event recorded for another stream. The wait on a kept event is
// made under the pool's lock, so the event cannot be recorded again meanwhile; a new
// record on the stream replaces it, and it returns to the pool. A retired stream's latest
// record is forgotten with its standing waits.

// Note [Transitive waits]
// Stream order is transitive: when U waited on an event of S and then recorded an event E,
// a stream T that waits on E is ordered after S's work up to U's wait too. So each latest
// record keeps the standing waits its stream had when it was recorded (taken before the
// record call, so every wait it names was made before the event), and a wait on it raises
// the waiter's standing waits to them as well as on the record's own stream. A reuse
// whose free is covered that way waits on nothing. In a many-stream loop the streams wait
// on each other all step, so one wait often orders a stream after several others: corpus
// many-streams seed 11 made 898 waits a steady step with direct waits only, 440 now (171
// records either way); seeds 1-12, five repetitions, 122,447 -> 77,587 waits. No wait is
// added, so no stream waits longer on the device than before. A stream's standing waits
// never claim more than the events it waited on carry, and a retired stream is forgotten
// in every record's list.

class event_pool {
 public:
  event_pool(backend::backend& device_backend, int device) : backend_(device_backend), device_(device) {}
  ~event_pool();
  event_pool(const event_pool&) = delete;
  event_pool& operator=(const event_pool&) = delete;

  // An idle event, from the pool or newly created. nullptr when creation failed.
  backend::event_handle acquire() noexcept;
  void release(backend::event_handle event) noexcept;
  // Events created so far (the pool keeps this small).
  std::int64_t created_count() const noexcept { return created_.load(std::memory_order_relaxed); }
  // Destroys every pooled event.
  void drain() noexcept;

  // Note [Standing waits]: a tick of the order clock, larger than every earlier one.
  std::uint64_t next_tick() noexcept { return tick_.fetch_add(1, std::memory_order_relaxed) + 1; }
  // Note [Standing waits]: the positions among the first kAskedSources `sources` that no
  // standing wait of `waiter` covers, as bits (a retired source or an unknown tick is never
  // covered; `waiter` itself never needs one). Later sources are left to order_after.
  static constexpr std::size_t kAskedSources = 64;
  std::uint64_t uncovered_sources(backend::stream_handle waiter, std::span<const stream_set::entry> sources) noexcept;
  // Orders `waiter` after the work queued on `source` up to its free at `freed_at_tick`:
  // nothing when a standing wait covers it, else makes `waiter` wait (no host blocking) on
  // the source's latest record if it covers the free (Note [Shared records]), or on an
  // event recorded now. `waited`: a wait was made; `recorded`: an event was recorded.
  backend::status order_after(backend::stream_handle waiter, backend::stream_handle source,
                              std::uint64_t freed_at_tick, bool& waited, bool& recorded) noexcept;
  // Records an event on `stream` and asks whether it already completed: ok when all work
  // queued on `stream` so far is done, not_ready when not, error on failure.
  // Both accept a retired stream's stand-in (Note [Retired streams]): its event is waited
  // for / queried instead (error when it could not be recorded).
  backend::status stream_idle(backend::stream_handle stream) noexcept;

  // Note [Retired streams]: records an event on `stream`, which is about to be destroyed,
  // and returns the stand-in that replaces it in the allocator's state (nullptr when no
  // host memory; then nothing was recorded).
  backend::stream_handle retire(backend::stream_handle stream) noexcept;
  bool is_retired(backend::stream_handle stream) noexcept;
  // Note [Standing waits]: forgets every standing wait of `stream`, as waiter or source,
  // and its latest record (Note [Shared records]).
  void forget_standing_waits(backend::stream_handle stream) noexcept;
  // For a retired stand-in: false once its work is known to be done (nothing to wait for).
  bool retired_work_pending(backend::stream_handle stand_in) noexcept;

 private:
  backend::backend& backend_;
  int device_;
  std::mutex mutex_;
  std::vector<backend::event_handle> idle_;
  // Note [Retired streams]: stand-in -> the event recorded on the stream as it was
  // destroyed (nullptr once it completed, or if it could not be recorded: `recorded` says).
  struct retired_stream {
    backend::event_handle event = nullptr;
    bool recorded = false;
  };
  std::unordered_map<backend::stream_handle, std::unique_ptr<retired_stream>> retired_;
  // Under mutex_: the retired record of `stream`, or nullptr.
  retired_stream* find_retired_locked(backend::stream_handle stream) noexcept;
  // Under mutex_: a retired stand-in's state: ok (done; its event went back to the pool),
  // not_ready, or error (nothing was recorded).
  backend::status retired_state_locked(retired_stream& record) noexcept;
  std::atomic<std::int64_t> created_{0};
  // Note [Standing waits]: the order clock.
  std::atomic<std::uint64_t> tick_{0};
  // waiter -> its standing waits: each source with the tick up to which its frees are
  // waited for (under mutex_).
  std::unordered_map<backend::stream_handle, stream_set> standing_waits_;
  // Note [Shared records]: source stream -> its latest recorded event, the tick taken just
  // before that record, and (Note [Transitive waits]) the source's standing waits then
  // (under mutex_).
  struct latest_record {
    backend::event_handle event = nullptr;
    std::uint64_t recorded_after_tick = 0;
    stream_set carried;
  };
  std::unordered_map<backend::stream_handle, latest_record> latest_records_;
  // Under mutex_: puts `event` back in the pool (destroys it when the pool cannot grow).
  void release_locked(backend::event_handle event) noexcept;
  // Note [Standing waits]: whether a standing wait up to `standing_tick` (0: none) covers a
  // free at `freed_at_tick`.
  static bool covers(std::uint64_t standing_tick, std::uint64_t freed_at_tick) noexcept {
    return freed_at_tick != stream_set::kUnknownTick && standing_tick >= freed_at_tick;
  }
  // Under mutex_: the tick up to which `waiter` is ordered after `source`'s frees (0: none).
  std::uint64_t standing_tick_locked(backend::stream_handle waiter, backend::stream_handle source) const noexcept;
  // Under mutex_: `source`'s standing waits, copied into the spare set's memory (empty when
  // no host memory: it then carries less).
  stream_set standing_waits_of_locked(backend::stream_handle source) noexcept;
  // Note [Inline streams]: the set a replaced latest record carried, whose host memory the
  // next copy of standing waits reuses (under mutex_).
  stream_set spare_carried_;
  // Under mutex_: remembers `waiter`'s wait on an event of `source` recorded after `tick`,
  // and the waits that event carries (Note [Standing waits], Note [Transitive waits]).
  void note_standing_wait_locked(backend::stream_handle waiter, backend::stream_handle source, std::uint64_t tick,
                                 const stream_set& carried) noexcept;
};

}  // namespace fragless::core
