// The free path of a device cache: blocks freed at once or kept pending until the events
// recorded on the other streams that used them complete (Note [Stream reuse]), slabs going
// back to the large pool, and pending frees completing.
// Invariant: a block is reusable by another stream only once it is ordered after every
// stream that used it (an event wait, or a device synchronization); until then it stays
// active. Nothing here throws.
#include "core/device_cache.hpp"

namespace fragless::core {
namespace {
// Room for one more entry, growing geometrically: the push_back after it cannot throw, so
// what is moved into the entry is never lost to a failed reallocation.
template <typename Entry>
void reserve_one_more(std::vector<Entry>& list) {
  if (list.size() == list.capacity()) list.reserve(list.capacity() < 8 ? 8 : list.capacity() * 2);
}
}  // namespace

// Note [Stream reuse]
// A block freed on stream S is reusable at once by new work on S: S runs its kernels in
// order. For any other stream T two mechanisms keep reuse safe without blocking the host:
//  - Free ranges of the large pool remember the streams that freed into them; placing a
//    block there for T records a pooled event on each of them and makes T wait on it
//    (cudaStreamWaitEvent). The event, recorded at reuse time, covers all work queued
//    before the free.
//  - A block used on other streams too (record_stream) gets, at free, one pooled event
//    recorded on each of those streams; it stays "pending free" (active) until all of them
//    completed, checked with cudaEventQuery when an allocation looks for memory, and by
//    the OOM path and empty_cache after their device synchronization.
// Small-pool objects are only reused by the stream whose shard owns them; slabs go back
// to the large pool (and so to other streams) tagged with that stream.
// If an event cannot be recorded on a remembered stream (the program destroyed it; its
// queued work still runs), the allocator falls back to one device synchronization
// (counted in num_sync_all_streams) and forgets every remembered stream.
// Streams are identified by handle value; a destroyed stream's state is retired first
// (Note [Retired streams], stream_retirement.cpp), so a new stream that receives the same
// handle inherits nothing of it.
// cache_settings::unsafe_skip_stream_waits disables both (test-only: proves the race tests bite).

// False when not even the fallback (one null event: a device synchronization) could be
// held (Note [Pending without host memory]). With the room reserved up front, the only
// allocation is the reserve: an event is acquired only once its entry has room, so a
// failure leaves none held.
bool device_cache::record_use_events(const stream_set& uses, stream_id allocated_on,
                                     std::vector<use_event>& events) noexcept {
  try {
    events.reserve(uses.entries().size());
  } catch (...) {
    try {
      events.assign(1, use_event{nullptr, allocated_on});
    } catch (...) {
      return false;
    }
    return true;
  }
  for (const stream_set::entry& each : uses.entries()) {
    const stream_id other = each.stream;
    if (other == allocated_on) continue;
    if (events_.is_retired(other)) {
      // Note [Retired streams]: no stream to record on; done, or a device synchronization.
      if (events_.retired_work_pending(other)) events.push_back(use_event{nullptr, other});
      continue;
    }
    void* event = events_.acquire();
    if (event != nullptr && backend_.record_event(device_, event, other) != backend::status::ok) {
      events_.release(event);
      event = nullptr;  // completes only with a device synchronization
    }
    events.push_back(use_event{event, other});
  }
  return true;
}

// Note [Pending in stream order]
// A stream runs its work in order, so an event recorded on it completes only after every
// event recorded on it before. A pending list is in the order of its frees, each of which
// recorded its events as it came; so once a scan of the list finds one stream's event not
// complete, it asks about no later event of that stream in that scan (busy_streams): they
// cannot have completed either. A scan asks about at most one event per stream still busy
// -- as PyTorch's process_events stops at each stream's first event not ready -- where it
// asked about every pending free's events, one driver call each, on every large allocation
// and every small miss. Where the order is not the record order -- two threads' frees
// entering the list the other way round, or a destroyed stream's handle given to a new
// stream (Note [Retired streams]) -- an event skipped may have completed: its free then
// waits longer than it had to (until the busy event before it completes, or a device
// synchronization), never less.
bool device_cache::events_complete(const std::vector<use_event>& events, busy_streams& busy) noexcept {
  for (const use_event& each : events) {
    if (each.event == nullptr || busy.contains(each.stream)) return false;
    if (backend_.query_event(device_, each.event) != backend::status::ok) {
      busy.add(each.stream);
      return false;
    }
  }
  return true;
}

// Large blocks only (small ones count in their shard). `deactivate`: the block also
// stops being active (not pending).
void device_cache::record_free_stats(const live_block& block, bool deactivate) noexcept {
  stats_.allocation[pool_large].decrease(1);
  stats_.allocated_bytes[pool_large].decrease(as_signed(block.size_bytes));
  stats_.requested_bytes[pool_large].decrease(as_signed(block.requested_bytes));
  if (block.size_bytes >= settings_.conf.max_split_bytes) stats_.oversize_allocations.decrease(1);
  if (!deactivate) return;
  stats_.active[pool_large].decrease(1);
  stats_.active_bytes[pool_large].decrease(as_signed(block.size_bytes));
}

// Holds the shard's mutex.
void device_cache::count_small_allocation(stream_shard& shard, std::size_t size_bytes,
                                          std::size_t request_bytes) noexcept {
  shard_stats& counters = shard.counters();
  counters.allocation.add(1);
  counters.active.add(1);
  counters.allocated_bytes.add(as_signed(size_bytes));
  counters.active_bytes.add(as_signed(size_bytes));
  counters.requested_bytes.add(as_signed(request_bytes));
}

// Note [Pending without host memory]
// Where the host has no memory (std::bad_alloc inside a path that must not throw), a free
// is delayed, never lost nor made unsafe:
//  - A free that must wait for other streams' uses is kept in a pending list with the
//    events it waits for. Without memory for that -- the events' list, or the list's entry
//    -- it waits for the device instead: the events it recorded go back to the pool, the
//    device is synchronized (counted in num_sync_all_streams), and the block is freed at
//    once, as the OOM path frees what a synchronization covers.
//  - A block the large pool cannot index (large_pool::release false: no node for its free
//    range; nothing changed) is kept pending with no event, and the next scan of the
//    pending list gives it back; so is an empty slab going back to the large pool
//    (slab_to_large_pool_locked), as a pending block of that pool. A pending free whose
//    release fails stays in the list, its events with it; a cache release that cannot list
//    the empty slabs keeps them cached, and still returns the surplus ones it already took.
// Room for an entry is reserved before anything moves into it, so a failed reallocation
// drops nothing. Only where even that fails, or the synchronization does, does a block
// stay unavailable (and active) for good: unavailable rather than unsafe.
// tests/allocator/host_memory_test.cpp fails each of a free's host allocations in turn,
// and random operations' allocations at random.

// Hot path for small blocks: one shard lock.
void device_cache::free_block(std::uintptr_t address, live_block&& block) noexcept {
  const bool wait_for_uses = block.other_streams != nullptr && !settings_.unsafe_skip_stream_waits &&
                             block.other_streams->foreign_to(block.stream);
  std::vector<use_event> events;
  // Note [Pending without host memory]
  const bool recorded = !wait_for_uses || record_use_events(*block.other_streams, block.stream, events);
  if (block.owner != nullptr) {
    stream_shard& shard = *block.shard;
    slab* surplus = nullptr;
    {
      std::lock_guard<spin_lock> lock(shard.mutex());
      shard_stats& counters = shard.counters();
      counters.allocation.subtract(1);
      counters.allocated_bytes.subtract(as_signed(block.size_bytes));
      counters.requested_bytes.subtract(as_signed(block.requested_bytes));
      if (wait_for_uses) {
        try {
          if (recorded) {
            reserve_one_more(shard.pending());  // may throw: `events` still ours
            shard.pending().push_back(
                pending_object{block.owner, block.slot, block.size_bytes, std::move(events), shard.next_release()});
            return;
          }
        } catch (...) {
        }
      } else {
        surplus = shard.free_object(block.owner, block.slot);
        counters.active.subtract(1);
        counters.active_bytes.subtract(as_signed(block.size_bytes));
      }
    }
    if (wait_for_uses) return free_small_after_synchronization(shard, block, events);
    if (surplus != nullptr) {
      std::lock_guard<std::mutex> lock(device_mutex_);
      return_slab_locked(shard, surplus);
      release_after_free_locked();
    }
    return;
  }
  std::lock_guard<std::mutex> lock(device_mutex_);
  live_blocks_.erase_freed(address);  // Note [Frees in flight]: the pool has it back below
  if (wait_for_uses) {
    try {
      if (recorded) {
        reserve_one_more(pending_large_);  // may throw: `events` still ours
        pending_large_.push_back(pending_large{address, block.size_bytes, block.stream, std::move(events)});
        record_free_stats(block, false);
        return;
      }
    } catch (...) {
    }
    // Note [Pending without host memory]
    release_events(events);
    if (!synchronize_locked()) {
      record_free_stats(block, false);
      return;
    }
  }
  // After the synchronization above, no stream's work can still touch the block.
  const stream_set streams = wait_for_uses ? stream_set() : stream_set(block.stream);
  if (!large_->release(address, block.size_bytes, streams)) {
    // Note [Pending without host memory]: kept pending, with no event to wait for, so the
    // next scan gives it back; unavailable only if even that entry finds no room.
    record_free_stats(block, false);
    keep_unindexed_locked(address, block.size_bytes, block.stream);
    return;
  }
  record_free_stats(block, true);
  release_after_free_locked();
}

// Note [Pending without host memory]: a small object whose free could not be kept
// pending. Takes device_mutex_, then the shard's mutex.
void device_cache::free_small_after_synchronization(stream_shard& shard, const live_block& block,
                                                    const std::vector<use_event>& events) noexcept {
  release_events(events);
  std::lock_guard<std::mutex> lock(device_mutex_);
  if (!synchronize_locked()) return;
  slab* surplus = nullptr;
  {
    std::lock_guard<spin_lock> shard_lock(shard.mutex());
    surplus = shard.free_object(block.owner, block.slot);
    shard.counters().active.subtract(1);
    shard.counters().active_bytes.subtract(as_signed(block.size_bytes));
  }
  if (surplus != nullptr) return_slab_locked(shard, surplus);
  release_after_free_locked();
}

// Holds device_mutex_ (the slab is already unlinked from its shard's lists).
void device_cache::return_slab_locked(stream_shard& shard, slab* released) noexcept {
  std::unique_ptr<slab> owned;
  {
    std::lock_guard<spin_lock> lock(shard.mutex());
    owned = shard.adopt_released(released);
  }
  slab_to_large_pool_locked(*owned, shard.stream(), false);
}

// Holds device_mutex_ (the slab is out of its shard). `idle`: no stream may still use it.
void device_cache::slab_to_large_pool_locked(const slab& owned, stream_id stream, bool idle) noexcept {
  const stream_set streams = idle ? stream_set() : stream_set(stream);
  // Note [Pending without host memory]: a range the pool cannot index is a pending block
  // of the large pool, active until the next scan gives it back.
  if (!large_->release(owned.address, owned.bytes, streams) &&
      keep_unindexed_locked(owned.address, owned.bytes, stream)) {
    stats_.active[pool_large].increase(1);
    stats_.active_bytes[pool_large].increase(as_signed(owned.bytes));
  }
  update(stats_.segment, pool_small, -1);
  stats_.reserved_bytes[pool_small].decrease(as_signed(owned.bytes));
  stats_.reserved_bytes[pool_large].increase(as_signed(owned.bytes));
}

// Holds device_mutex_. Note [Pending without host memory]: a range the large pool could
// not index, kept pending with no event so that the next scan gives it back; false (the
// range unavailable for good) only if even that entry finds no room.
bool device_cache::keep_unindexed_locked(std::uintptr_t address, std::size_t size_bytes, stream_id stream) noexcept {
  try {
    reserve_one_more(pending_large_);
  } catch (...) {
    return false;
  }
  pending_large_.push_back(pending_large{address, size_bytes, stream, {}});
  return true;
}

// `covered(entry)`: the device synchronization (if any) completed the entry's uses.
// `complete(entry)` false: no host memory to give the block back; the entry stays, its
// events with it, for a later scan (Note [Pending without host memory]).
template <typename Pending, typename Covered, typename Complete>
void device_cache::complete_pending(std::vector<Pending>& pending, bool device_synchronized, Covered&& covered,
                                    Complete&& complete) noexcept {
  busy_streams busy;  // Note [Pending in stream order]
  auto keep = pending.begin();
  for (auto at = pending.begin(); at != pending.end(); ++at) {
    if ((!(device_synchronized && covered(*at)) && !events_complete(at->events, busy)) || !complete(*at)) {
      if (keep != at) *keep = std::move(*at);
      ++keep;
      continue;
    }
    release_events(at->events);
  }
  pending.erase(keep, pending.end());
}

// Holds device_mutex_.
void device_cache::process_pending_locked(bool device_synchronized) noexcept {
  if (device_synchronized) pending_need_sync_ = false;
  // Large frees hold the device lock, as does the synchronization: all came before it.
  const auto before_synchronization = [](const pending_large&) { return true; };
  complete_pending(pending_large_, device_synchronized, before_synchronization, [&](const pending_large& done) {
    const stream_set streams = device_synchronized ? stream_set() : stream_set(done.stream);
    if (!large_->release(done.address, done.size_bytes, streams)) return false;
    stats_.active[pool_large].decrease(1);
    stats_.active_bytes[pool_large].decrease(as_signed(done.size_bytes));
    return true;
  });
}

// Holds the shard's mutex. Surplus-empty slabs are unlinked and handed to the caller. With
// `device_synchronized`, only objects freed before the synchronization's mark complete
// without their events (Note [Synchronized settle]).
void device_cache::process_pending_small(stream_shard& shard, bool device_synchronized,
                                         std::vector<slab*>* surplus) noexcept {
  const auto before_synchronization = [&](const pending_object& entry) {
    return shard.covered_by_synchronization(entry.freed_at_release);
  };
  complete_pending(shard.pending(), device_synchronized, before_synchronization, [&](const pending_object& done) {
    try {
      reserve_one_more(*surplus);  // room for a slab this free may empty
    } catch (...) {
      return false;
    }
    slab* released = shard.free_object(done.owner, done.slot);
    if (released != nullptr) surplus->push_back(released);
    shard.counters().active.subtract(1);
    shard.counters().active_bytes.subtract(as_signed(done.size_bytes));
    return true;
  });
}

}  // namespace fragless::core
