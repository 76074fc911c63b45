// The allocator of one device: small pool shards + large pool + pending frees + stats,
// and the out-of-memory path. The public API (allocator.hpp) routes every call here.
//
// Locks, in the only order they may be taken (never the other way round):
//   device_mutex_ (large pool, pending large frees, shard table writes)
//     -> a shard's mutex (its slabs and pending small frees)
//       -> stats_mutex_
// The small-pool hot path takes one shard mutex and stats_mutex_; it drops the shard
// mutex before it needs a new slab from the large pool (device_mutex_).
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
#include "core/event_pool.hpp"
#include "core/large_pool.hpp"
#include "core/live_block_map.hpp"
#include "core/small_pool.hpp"
#include "fragless/fragless.hpp"
#include "fragless/stats.hpp"
#include "fragless/stats_snapshot.hpp"

namespace fragless::core {

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
// Settings.unsafe_skip_stream_waits disables both (test-only: proves the race tests bite).
// Note [Exact start]
// A device's first kExactStartAllocations small requests skip the size-class slabs and are
// placed exactly, at 512 B granularity, in the large pool (Note [Placement]). A program
// that allocates a lot is past the threshold within its first iterations and gets the
// slab fast path for the rest of its life. A small program -- one whose reserved memory
// never exceeded kSmallProgramReservedBytes -- keeps exact placement for up to
// kSmallProgramExactAllocations small requests: for it the slabs' class rounding and partly
// used slabs (up to ~2.5 MiB over 40 classes) are a large share of its memory, and a
// program that repeats a planned set of buffers would otherwise switch to slabs part way
// through a repetition, needing new slabs on top of the page its exactly placed buffers
// already fill (a 1 MiB buffer set then reserves two pages where one holds it). The bound
// on requests keeps a small program with a high allocation rate from paying the slow path
// for long. Blocks placed exactly stay large-pool blocks until freed. The hot path reads one
// counter that stops changing at zero; the end is decided on the exact path (device lock).
inline constexpr std::int64_t kExactStartAllocations = 1024;
inline constexpr std::int64_t kSmallProgramExactAllocations = 65536;
inline constexpr std::size_t kSmallProgramReservedBytes = std::size_t{64} << 20;

struct cache_settings {
  bool use_vmm = true;
  double virtual_range_factor = 2.0;  // VMM range = factor * device capacity
  bool unsafe_skip_stream_waits = false;
  std::size_t reserved_limit_bytes = SIZE_MAX;           // max_cached_bytes
  std::size_t small_limit_bytes = 1024 * 1024;           // small_max_bytes, capped at kSmallLimitBytes
  std::size_t release_threshold_bytes = SIZE_MAX;        // Note [Release threshold]
  double garbage_collection_fraction = 0.0;              // Note [Release threshold]; 0: off
  std::size_t max_split_bytes = SIZE_MAX;                // Note [Max split size]
  std::size_t dedicated_mapping_bytes = SIZE_MAX;        // Note [Dedicated mappings]; SIZE_MAX: never
  std::size_t compact_threshold_bytes = SIZE_MAX;        // Note [Compaction]; SIZE_MAX: no automatic pass
  bool background_compaction = false;                    // Note [Compaction]
  bool page_moves = true;                                // Note [Page moves]
  double page_move_headroom = 0.01;                      // Note [Page moves]
  bool loop_plans = true;                                // Note [Loop plans]
  double loop_plan_headroom = 0.03;                      // Note [Loop plans]
  std::uint32_t compaction_age_passes = 10;              // Note [Compaction]
  std::int64_t compaction_interval_ns = 1'000'000'000;   // Note [Compaction]
  std::int64_t exact_start_allocations = kExactStartAllocations;  // Note [Exact start]; 0: off
  std::int64_t small_program_exact_allocations = kSmallProgramExactAllocations;  // Note [Exact start]
  std::size_t small_program_reserved_bytes = kSmallProgramReservedBytes;        // Note [Exact start]
  std::size_t small_segment_bytes = std::size_t{2} << 20;   // Note [Segment sizes]
  std::size_t large_segment_bytes = std::size_t{20} << 20;  // Note [Segment sizes]
};

// Note [Release threshold]
// Cached free memory (free pages in VMM mode, whole free segments in cudaMalloc mode) is
// kept for reuse by default. Two options return it early, at slow-path points only (a
// large allocation, a large free, a slab going back to the large pool), never with a
// device synchronization: large_pool::release_idle_cached() releases only memory no
// stream can still touch (Note [Page cache]); memory a stream might still touch stays
// cached until a later slow-path point finds it idle.
//  - release_threshold_bytes: after such a point, cached bytes above the threshold go.
//  - garbage_collection_threshold (fraction f): when an allocation would grow reserved
//    memory while reserved memory exceeds f x the allowed memory (capacity, lowered by
//    set_memory_fraction / max_cached_bytes), cached memory is released first, down to
//    f x allowed if the cache holds that much, and the allocation is retried.


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
  const char* backend_name() const noexcept { return large_.uses_vmm() ? "vmm" : "cudaMalloc"; }

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
    return large_.shared_pieces(address, bytes);
  }
  bool uses_vmm() const noexcept { return large_.uses_vmm(); }
  // Blocks handed out or pending free, over both pools (running counters, no snapshot).
  std::int64_t active_blocks();

 private:
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
  // Note [Exact start]: ends exact placement once a program past kExactStartAllocations
  // small requests is not a small program. Holds device_mutex_.
  void end_exact_start_if_due_locked() noexcept;
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
  void process_pending_locked(bool device_synchronized) noexcept;
  std::size_t release_cache_locked(std::size_t bytes_to_keep) noexcept;
  bool synchronize_locked() noexcept;
  // Completes what can complete (everything, after a synchronization) and returns empty
  // slabs to the large pool.
  void settle_locked(bool synchronized) noexcept;
  // Note [Compaction]
  void compact_if_due_locked() noexcept;
  void record_compaction_locked(const compaction_outcome& outcome) noexcept;
  // Runs compact_if_due_locked every interval on a thread of its own (background_compaction).
  void start_background_compaction();
  void stop_background_compaction() noexcept;
  void account_device_locked() noexcept;
  [[noreturn]] void throw_out_of_memory_locked(std::size_t request_bytes);
  // Holds the shard's mutex.
  void process_pending_small(stream_shard& shard, bool device_synchronized, std::vector<slab*>* surplus) noexcept;
  void return_slab_locked(stream_shard& shard, slab* released) noexcept;
  void record_free_stats(const live_block& block, bool deactivate) noexcept;
  void count_small_allocation(stream_shard& shard, std::size_t size_bytes, std::size_t request_bytes) noexcept;
  // The small-pool part of the per-allocation stats, summed over shards.
  struct small_sums {
    std::array<stat, 5> values{};  // allocation, active, allocated_bytes, active_bytes, requested_bytes
  };
  small_sums sum_small_stats();
  // Holds stats_mutex_: folds the current totals into the small/all peaks.
  void sample_peaks_locked(const small_sums& sums) noexcept;
  std::vector<void*> record_use_events(const live_block& block) noexcept;
  bool events_complete(const std::vector<void*>& events) noexcept;

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
  std::atomic<std::uint64_t> private_pool_{0};
  std::mutex device_mutex_;
  event_pool events_;
  large_pool large_;
  struct pending_large {
    std::uintptr_t address;
    std::size_t size_bytes;
    stream_id stream;
    std::vector<void*> events;
  };
  std::vector<pending_large> pending_large_;
  bool pending_need_sync_ = false;  // some pending free could not record its events

  std::shared_mutex shards_mutex_;
  std::unordered_map<stream_id, std::unique_ptr<stream_shard>> shards_;

  std::mutex stats_mutex_;
  device_stats stats_;
  // What account_device_locked last folded in.
  std::size_t accounted_reserved_bytes_ = 0;
  std::size_t accounted_segments_ = 0;
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
