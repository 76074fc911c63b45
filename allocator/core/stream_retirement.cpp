// Retiring a stream that is about to be destroyed: its handle leaves the allocator's state
// so that a later stream with the same handle value inherits nothing (Note [Retired streams]).
// Invariant: after device_cache::retire_stream(S) returns, no free range, cached mapping,
// pending free, shard or live block of that cache names S; whatever named it names a
// stand-in whose reuse waits on an event recorded on S before it was destroyed.
#include "core/device_cache.hpp"
#include "core/log.hpp"

namespace fragless::core {

// Note [Retired streams]
// Streams are identified by their handle value (so are PyTorch's). cudaStreamDestroy
// returns at once while the stream's queued work still runs, and the next stream created
// -- on any device -- may receive the same handle. Without care that stream would inherit
// the dead stream's small-pool shard and the free ranges it freed into, and reuse them
// with no wait: Note [Stream reuse] lets a stream reuse its own frees at once because its
// kernels run in order, which is false for a different stream with the same handle.
// So before the real destroy (the preload hooks cudaStreamDestroy and cuStreamDestroy;
// others call fragless_retire_stream), every cache of every device that knows the stream:
//  - records one pooled event on it (the last moment it can be recorded), and creates a
//    stand-in: a handle value of its own that no stream can have (the address of the
//    record holding that event, kept until the cache goes);
//  - renames the stream to the stand-in everywhere: free ranges and cached mappings of the
//    large pool, pending large frees, the live blocks allocated on or used on it, and its
//    shard, which moves to the stand-in's key (its live objects still free into it); the
//    cache takes a new instance id so that no thread's shard cache keeps the old entry;
//  - no stream ever allocates on the stand-in, so memory it names is reused only across
//    streams: the large pool makes the new stream wait on the stand-in's event (instead of
//    recording a new one, which a dead handle cannot take) and release checks query it;
//    once it completed, the event returns to the pool and the stand-in needs no wait.
//    Slabs of the retired shard go back to the large pool under the stand-in when empty.
// If the event cannot be recorded (the handle is already invalid), waits on the stand-in
// fail and the large pool falls back to one device synchronization, as for any stream it
// cannot record on (Note [Stream reuse]). Cost, per destroyed stream and cache: a pass
// over the cache's pending frees, the live blocks and the free ranges to find out whether
// it knows the stream (under the device lock), a second one to rename it when it does,
// and a few dozen bytes kept per retired stream.

// (vmm_pool adds its cached mappings.)
bool large_pool::rename_stream(stream_id from, stream_id to) { return index_.rename_stream(from, to); }

void device_cache::retire_stream(stream_id stream) noexcept {
  if (stream == nullptr) return;  // the legacy stream is never destroyed
  try {
    std::lock_guard<std::mutex> lock(device_mutex_);
    // Note [Standing waits]: a new stream with this handle has waited on nothing.
    events_.forget_standing_waits(stream);
    // Does this cache know the stream at all? (Most caches do not: one pass, no event.)
    bool known = false;
    {
      std::shared_lock<std::shared_mutex> shards_lock(shards_mutex_);
      known = shards_.count(stream) != 0;
    }
    if (!known) {
      for (const pending_large& pending : pending_large_) known |= pending.stream == stream;
      live_blocks_.for_each([&](std::uintptr_t, const live_block& block) {
        known |= block.cache == this && (block.stream == stream || (block.other_streams && block.other_streams->contains(stream)));
      });
      if (!known) large_->index().for_each([&](const free_range& range) { known |= range.streams.contains(stream); });
      if (!known) {
        // A cached mapping may still name it: renaming to itself only asks.
        known = large_->rename_stream(stream, stream);
      }
    }
    if (!known) return;
    const stream_id stand_in = events_.retire(stream);
    if (stand_in == nullptr) {
      // No host memory for a stand-in: forget streams after a device synchronization.
      if (synchronize_locked()) settle_locked(true);
      log_message(log_level::warn, "device " + std::to_string(device_) +
                                       ": retiring a destroyed stream needed a device synchronization");
      return;
    }
    large_->rename_stream(stream, stand_in);
    for (pending_large& pending : pending_large_)
      if (pending.stream == stream) pending.stream = stand_in;
    live_blocks_.for_each_mutable([&](std::uintptr_t, live_block& block) {
      if (block.cache != this) return;
      if (block.stream == stream) block.stream = stand_in;
      if (block.other_streams) block.other_streams->rename(stream, stand_in);
    });
    {
      std::unique_lock<std::shared_mutex> shards_lock(shards_mutex_);
      auto found = shards_.find(stream);
      if (found != shards_.end()) {
        std::unique_ptr<stream_shard> shard = std::move(found->second);
        shards_.erase(found);
        shard->rename_stream(stand_in);
        shards_.emplace(stand_in, std::move(shard));
      }
    }
    instance_id_.store(new_cache_instance_id(), std::memory_order_relaxed);
  } catch (...) {
    // Host memory ran out while renaming: a device synchronization makes every free range
    // clean, so nothing left under the old handle needs a wait any more.
    try {
      std::lock_guard<std::mutex> lock(device_mutex_);
      if (synchronize_locked()) settle_locked(true);
    } catch (...) {
    }
  }
}

}  // namespace fragless::core
