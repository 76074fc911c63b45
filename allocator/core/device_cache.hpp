// The allocator of one device: small pool shards + large pool + pending frees + stats,
// and the out-of-memory path. The public API (allocator.hpp) routes every call here.
// Code: device_cache.cpp (set-up, streams, allocation hot paths), device_cache_slow_path.cpp
// (large-block placement, thresholds, out of memory), device_cache_free.cpp (frees and
// pending frees), device_cache_control.cpp (empty_cache, compaction passes, memory
// fraction), device_cache_stats.cpp (stats and snapshot).
//
// Locks, in the only order they may be taken (a path may skip any, never go back up):
//   background_mutex_ (the background compaction thread, around each pass)
//     -> device_mutex_ (large pool, pending large frees, end of exact start, compaction,
//                       stats_ and the accounted_* figures)
//       -> shards_mutex_ (the shard table: shared to look up or walk it, exclusive to add)
//         -> a shard's mutex (its slabs, pending small frees and shard_stats)
// The live block map's shard locks are taken alone, never with one of these held.
// The small-pool hot path (an object from a partial slab) takes one shard mutex and one
// live-map shard lock, and not the device lock: its counters are the shard's own
// (Note [Stats pools]). It drops the shard mutex before it needs a new slab (device_mutex_).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <climits>
#include <memory>
#include <mutex>
#include <condition_variable>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backend/backend.hpp"
#include "core/cache_settings.hpp"
#include "core/event_pool.hpp"
#include "core/large_pool.hpp"
#include "core/live_block_map.hpp"
#include "core/small_pool.hpp"
#include "fragless/fragless.hpp"
#include "fragless/stats.hpp"
#include "fragless/stats_snapshot.hpp"

namespace fragless::core {

// A fresh id for a cache's entries in the threads' shard caches.
std::uint64_t new_cache_instance_id() noexcept;

class device_cache {
 public:
  device_cache(backend::backend& device_backend, int device, live_block_map& live_blocks,
               const cache_settings& settings);
  ~device_cache();
  device_cache(const device_cache&) = delete;
  device_cache& operator=(const device_cache&) = delete;

  // Reads the device's capacity and sets up the large pool. @throws device_error
  void initialize();
  int device() const noexcept { return device_; }
  const char* backend_name() const noexcept { return large_->uses_vmm() ? "vmm" : "cudaMalloc"; }

  // @throws out_of_memory_error, invalid_argument_error, device_error
  void* allocate(std::size_t request_bytes, stream_id stream);
  // Frees a block already taken out of the live map (never throws).
  void free_block(std::uintptr_t address, live_block&& block) noexcept;
  // Checks that `stream` belongs to this device. @throws invalid_argument_error
  void check_stream(stream_id stream);
  // Note [Retired streams]: `stream` is about to be destroyed; nothing of its state may pass
  // to a later stream that receives the same handle. Never throws, never blocks the host.
  void retire_stream(stream_id stream) noexcept;

  std::size_t release_cache(std::size_t bytes_to_keep);
  // Note [Compaction]: the explicit pass (no device synchronization).
  compact_result compact() noexcept;
  // Note [Dormant mappings] (vmm_pool_dormant.cpp): makes the unmaps deferred so far, before
  // a capture begins. Takes the device lock.
  void unmap_dormant_ranges() noexcept;
  void set_memory_fraction(double fraction);
  // All stats. with_layout recomputes the layout figures (segments, inactive splits,
  // largest free block) from a snapshot; without it they keep their last computed values
  // (cheap: for periodic publishing).
  device_stats stats(bool with_layout = true);
  void reset_peak_stats();
  void reset_accumulated_stats();
  memory_snapshot snapshot();
  std::uint64_t capacity_bytes() const noexcept { return capacity_bytes_; }
  // Note [Private pools]: the pool this cache serves (0: the device's own cache). Tags the
  // snapshot's segments; set when a pool takes the cache over.
  void set_private_pool(std::uint64_t pool) noexcept { private_pool_.store(pool, std::memory_order_relaxed); }
  std::uint64_t private_pool() const noexcept { return private_pool_.load(std::memory_order_relaxed); }
  // Note [IPC sharing]: the physical allocations under a live block (takes the device lock).
  std::vector<large_pool::shared_piece> shared_pieces(std::uintptr_t address, std::size_t bytes) {
    std::lock_guard<std::mutex> lock(device_mutex_);
    return large_->shared_pieces(address, bytes);
  }
  bool uses_vmm() const noexcept { return large_->uses_vmm(); }
  // Blocks handed out or pending free, over both pools (running counters, no snapshot).
  std::int64_t active_blocks();

 private:
  static std::int64_t as_signed(std::size_t value) noexcept { return static_cast<std::int64_t>(value); }
  // Note [Exact start]: true while this request should be placed exactly.
  bool take_exact_start() noexcept {
    if (exact_start_remaining_.load(std::memory_order_relaxed) <= 0) return false;
    return exact_start_remaining_.fetch_sub(1, std::memory_order_relaxed) > 0;
  }
  stream_shard& shard_for(stream_id stream);
  stream_shard& create_shard(stream_id stream);
  void* allocate_small(std::size_t request_bytes, stream_id stream);
  // `exact_start`: a small request placed exactly (Note [Exact start]).
  void* allocate_large(std::size_t request_bytes, stream_id stream, bool exact_start = false);
  // Note [Exact start]: ends exact placement once a program past exact_start_allocations
  // small requests is not a small program and has not settled. Holds device_mutex_.
  void end_exact_start_if_due_locked() noexcept;
  // The large pool's device calls so far (creates, releases, maps, unmaps). Holds
  // device_mutex_.
  std::int64_t large_pool_device_calls_locked() const noexcept;
  // Slow paths. All hold device_mutex_.
  // `placed_bytes` (if given) receives the block's size (Note [Max split size]).
  std::uintptr_t place_large_locked(std::size_t size_bytes, std::size_t request_bytes, stream_id stream,
                                    std::size_t* placed_bytes = nullptr);
  backend::status allocate_with_collection_locked(std::size_t size_bytes, stream_id stream, std::uintptr_t* address,
                                                  std::size_t* placed_bytes) noexcept;
  // Note [Release threshold]: releases idle cached bytes above release_threshold_bytes.
  void release_above_threshold_locked() noexcept;
  // After a large free or a slab's return: the release threshold and automatic compaction.
  void release_after_free_locked() noexcept;
  // Note [Loop plans]: gives a plan about to choose its range the empty slabs the small
  // pool keeps, when the large pool asks.
  void give_plan_room_locked() noexcept;
  void process_pending_locked(bool device_synchronized) noexcept;
  // Completes the entries of `pending` whose events completed (and, when the device was
  // synchronized, those covered(entry) says the synchronization covered): releases their
  // events, calls complete(entry), keeps the others in order. The caller holds the lock
  // that guards `pending`.
  template <typename Pending, typename Covered, typename Complete>
  void complete_pending(std::vector<Pending>& pending, bool device_synchronized, Covered&& covered,
                        Complete&& complete) noexcept;
  std::size_t release_cache_locked(std::size_t bytes_to_keep) noexcept;
  // Marks every shard's releases so far (Note [Synchronized settle]), then synchronizes
  // the device; false (and logged) when that fails.
  bool synchronize_locked() noexcept;
  // Completes what can complete (after a synchronization, everything it covered) and
  // returns empty slabs to the large pool (Note [Synchronized settle]).
  void settle_locked(bool synchronized) noexcept;
  // Note [Compaction]
  void compact_if_due_locked() noexcept;
  void record_compaction_locked(const compaction_outcome& outcome) noexcept;
  // Runs compact_if_due_locked every interval on a thread of its own (background_compaction).
  void start_background_compaction();
  void stop_background_compaction() noexcept;
  // Note [Large-pool accounting]: reserved bytes, segments and mapped pages, and the
  // running counters when the stats are read (both hold device_mutex_).
  void account_device_locked() noexcept;
  void fold_large_pool_counters_locked() noexcept;
  [[noreturn]] void throw_out_of_memory_locked(std::size_t request_bytes);
  // Holds the shard's mutex.
  void process_pending_small(stream_shard& shard, bool device_synchronized, std::vector<slab*>* surplus) noexcept;
  void return_slab_locked(stream_shard& shard, slab* released) noexcept;
  // Holds device_mutex_: a slab out of its shard gives its range to the large pool, or keeps
  // it pending there (Note [Pending without host memory]).
  void slab_to_large_pool_locked(const slab& owned, stream_id stream, bool idle) noexcept;
  bool keep_unindexed_locked(std::uintptr_t address, std::size_t size_bytes, stream_id stream) noexcept;
  void record_free_stats(const live_block& block, bool deactivate) noexcept;
  void count_small_allocation(stream_shard& shard, std::size_t size_bytes, std::size_t request_bytes) noexcept;
  // Holds device_mutex_. The small-pool part of the per-allocation stats, summed over
  // shards (a stats read).
  small_pool_sums sum_small_stats();
  // Holds device_mutex_. Their currents alone, in one pass over the shards: the hot path of
  // every large allocation and new slab (Note [Peaks at a large allocation]).
  small_pool_currents sum_small_currents_locked() noexcept;
  // Holds device_mutex_: folds the small pool's currents into the small/all peaks.
  void sample_peaks_locked(const small_pool_currents& small_currents) noexcept;
  // Into `events`: an event on each stream of `uses` but `allocated_on` (record_stream()
  // uses of a block being freed); a null event for one that completes only with a device
  // synchronization. False when no host memory held even that.
  bool record_use_events(const stream_set& uses, stream_id allocated_on, std::vector<use_event>& events) noexcept;
  // Note [Pending without host memory]: frees `block` of `shard` once the device is
  // synchronized. Takes device_mutex_.
  void free_small_after_synchronization(stream_shard& shard, const live_block& block,
                                        const std::vector<use_event>& events) noexcept;
  // Gives `events` back to the pool (a pending entry completed, or one that could not be kept).
  void release_events(const std::vector<use_event>& events) noexcept {
    for (const use_event& each : events) events_.release(each.event);
  }
  // Whether every one of `events` completed; asks no event of a stream in `busy`, and adds
  // the stream of the first one found not complete (Note [Pending in stream order]).
  bool events_complete(const std::vector<use_event>& events, busy_streams& busy) noexcept;

  backend::backend& backend_;
  const int device_;
  live_block_map& live_blocks_;
  const cache_settings settings_;
  // Keys this cache's entries in the threads' shard caches; a retired stream gives the cache
  // a new id, so no thread keeps a cached shard under the retired handle (Note [Retired streams]).
  std::atomic<std::uint64_t> instance_id_;
  const std::size_t small_limit_bytes_;
  std::uint64_t capacity_bytes_ = 0;

  const std::int64_t exact_start_initial_;
  std::atomic<std::int64_t> exact_start_remaining_;
  // Note [Exact start]: windows of exact_start_allocations / 2 small requests placed
  // exactly -- where the current one ends (in requests taken), the large pool's device
  // calls at its start, and whether the last one to end saw any -- and whether one past
  // exact_start_allocations saw none (for good). Under device_mutex_.
  std::int64_t exact_start_window_end_ = 0;
  std::int64_t exact_start_window_calls_ = 0;
  bool exact_start_window_called_ = true;
  bool exact_start_settled_ = false;
  std::atomic<std::uint64_t> private_pool_{0};
  std::mutex device_mutex_;
  event_pool events_;
  std::unique_ptr<large_pool> large_;  // set by initialize()
  struct pending_large {
    std::uintptr_t address;
    std::size_t size_bytes;
    stream_id stream;
    std::vector<use_event> events;
  };
  std::vector<pending_large> pending_large_;
  bool pending_need_sync_ = false;  // some pending free could not record its events

  std::shared_mutex shards_mutex_;
  std::unordered_map<stream_id, std::unique_ptr<stream_shard>> shards_;
  // Every shard of shards_, in the order they were made: a shard is renamed (Note [Retired
  // streams]) but never destroyed before the cache. Under device_mutex_ (sum_small_stats
  // walks it at every large allocation, holding that lock already).
  std::vector<stream_shard*> shard_list_;

  device_stats stats_;  // under device_mutex_ (Note [Stats pools])
  // What account_device_locked (the layout figures) and fold_large_pool_counters_locked
  // last folded in (under device_mutex_).
  std::size_t accounted_reserved_bytes_ = 0;
  std::size_t accounted_segments_ = 0;
  std::size_t accounted_mapped_pages_ = 0;
  large_pool_counters accounted_counters_;
  loop_plan_counters accounted_plan_counters_;

  std::int64_t last_compaction_ns_ = 0;  // under device_mutex_
  std::size_t reserved_high_water_bytes_ = 0;  // under device_mutex_ (Note [Exact start])
  std::mutex background_mutex_;
  std::condition_variable background_cv_;
  bool stop_background_ = false;
  std::thread background_;
};

}  // namespace fragless::core
