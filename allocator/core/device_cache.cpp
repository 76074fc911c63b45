// One device's allocator: hot paths, pending frees, OOM path, stats and snapshot
// (see device_cache.hpp for the lock order and Note [Stream reuse]).
#include "core/device_cache.hpp"

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdio>
#include <map>

#include "core/log.hpp"
#include "core/size_classes.hpp"

namespace fragless::core {
namespace {

std::atomic<std::uint64_t> next_instance_id{1};

// Per-thread cache of the last shards used: (device cache instance, stream) -> shard.
struct shard_cache_entry {
  std::uint64_t instance = 0;
  stream_id stream = nullptr;
  stream_shard* shard = nullptr;
};
thread_local std::array<shard_cache_entry, 4> shard_cache{};
thread_local unsigned shard_cache_next = 0;

std::string format_bytes(std::uint64_t bytes) {
  char text[64];
  if (bytes < 1024) {
    std::snprintf(text, sizeof text, "%" PRIu64 " bytes", bytes);
  } else {
    static const char* const units[] = {"KiB", "MiB", "GiB", "TiB"};
    double value = static_cast<double>(bytes) / 1024.0;
    std::size_t unit = 0;
    while (value >= 1024.0 && unit + 1 < 4) {
      value /= 1024.0;
      ++unit;
    }
    std::snprintf(text, sizeof text, "%.2f %s", value, units[unit]);
  }
  return text;
}

std::int64_t as_signed(std::size_t value) noexcept { return static_cast<std::int64_t>(value); }

}  // namespace

device_cache::device_cache(backend::backend& device_backend, int device, live_block_map& live_blocks,
                           const cache_settings& settings)
    : backend_(device_backend),
      device_(device),
      live_blocks_(live_blocks),
      settings_(settings),
      instance_id_(new_cache_instance_id()),
      small_limit_bytes_(std::min(settings.small_limit_bytes, kSmallLimitBytes)),
      exact_start_initial_(settings.exact_start_allocations <= 0
                               ? 0
                               : std::max(settings.exact_start_allocations, settings.small_program_exact_allocations)),
      exact_start_remaining_(exact_start_initial_),
      events_(device_backend, device),
      large_(device_backend, device, events_) {}

std::uint64_t new_cache_instance_id() noexcept { return next_instance_id.fetch_add(1); }

device_cache::~device_cache() {
  stop_background_compaction();
  // Pending events go back to the pool, which the event_pool destructor destroys.
  for (pending_large& pending : pending_large_)
    for (void* event : pending.events) events_.release(event);
  for (auto& [stream, shard] : shards_)
    for (pending_object& pending : shard->pending())
      for (void* event : pending.events) events_.release(event);
}

void device_cache::initialize() {
  backend::memory_info info;
  if (backend_.get_memory_info(device_, &info) != backend::status::ok)
    throw device_error("fragless: cannot read the memory of device " + std::to_string(device_) + ": " +
                       backend_.last_error_text());
  capacity_bytes_ = info.total_bytes;
  const auto range_bytes = static_cast<std::size_t>(static_cast<double>(capacity_bytes_) * settings_.virtual_range_factor);
  if (large_.initialize(settings_.use_vmm, range_bytes) != backend::status::ok)
    throw device_error("fragless: cannot set up device " + std::to_string(device_) + ": " + backend_.last_error_text());
  if (settings_.use_vmm && !large_.uses_vmm())
    log_message(log_level::info, "device " + std::to_string(device_) +
                                     ": VMM unavailable, using cudaMalloc segments (" + backend_.last_error_text() + ")");
  if (log_enabled(log_level::info))
    log_message(log_level::info, "device " + std::to_string(device_) + ": " + backend_name() + " backend, capacity " +
                                     format_bytes(capacity_bytes_));
  if (settings_.unsafe_skip_stream_waits)
    log_message(log_level::warn, "unsafe_skip_stream_waits is on: blocks are reused across streams without "
                                 "ordering (test-only)");
  large_.set_skip_stream_waits(settings_.unsafe_skip_stream_waits);
  large_.set_reserved_limit(settings_.reserved_limit_bytes);
  large_.set_segment_sizes(settings_.small_segment_bytes, settings_.large_segment_bytes);
  large_.set_max_split(settings_.max_split_bytes);
  large_.set_dedicated_threshold(settings_.dedicated_mapping_bytes);
  large_.set_page_moves(settings_.page_moves);
  large_.set_page_move_headroom(settings_.page_move_headroom);
  large_.set_loop_plans(settings_.loop_plans, settings_.loop_plan_headroom);
  large_.set_compaction_age(settings_.compaction_age_passes);
  stats_.page_compaction = large_.uses_vmm() ? 1 : 0;
  start_background_compaction();
  stats_.max_split_size = settings_.max_split_bytes == SIZE_MAX ? -1 : as_signed(settings_.max_split_bytes);
}

// ---------------------------------------------------------------------------------------
// Streams and shards

void device_cache::check_stream(stream_id stream) {
  int stream_device = -1;
  if (backend_.stream_device(stream, device_, &stream_device) != backend::status::ok)
    throw invalid_argument_error("fragless: cannot tell the device of stream " +
                                 std::to_string(reinterpret_cast<std::uintptr_t>(stream)) + ": " +
                                 backend_.last_error_text());
  if (stream_device != device_)
    throw invalid_argument_error("fragless: stream " + std::to_string(reinterpret_cast<std::uintptr_t>(stream)) +
                                 " belongs to device " + std::to_string(stream_device) + ", not to device " +
                                 std::to_string(device_));
}

// Hot path: a thread-local lookup, then a shared-locked map lookup.
stream_shard& device_cache::shard_for(stream_id stream) {
  for (const shard_cache_entry& entry : shard_cache)
    if (entry.instance == instance_id_.load(std::memory_order_relaxed) && entry.stream == stream) return *entry.shard;
  stream_shard* found = nullptr;
  {
    std::shared_lock<std::shared_mutex> lock(shards_mutex_);
    auto at = shards_.find(stream);
    if (at != shards_.end()) found = at->second.get();
  }
  if (found == nullptr) found = &create_shard(stream);
  shard_cache[shard_cache_next++ % shard_cache.size()] = {instance_id_.load(std::memory_order_relaxed), stream, found};
  return *found;
}

// Slow path, first use of a stream on this device: checks the stream, adds its shard.
stream_shard& device_cache::create_shard(stream_id stream) {
  check_stream(stream);
  std::unique_lock<std::shared_mutex> lock(shards_mutex_);
  auto& slot = shards_[stream];
  if (!slot) slot = std::make_unique<stream_shard>(stream);
  return *slot;
}

// ---------------------------------------------------------------------------------------
// Allocation

void* device_cache::allocate(std::size_t request_bytes, stream_id stream) {
  if (request_bytes == 0) return nullptr;
  if (request_bytes > capacity_bytes_) {
    std::lock_guard<std::mutex> lock(device_mutex_);
    {
      std::lock_guard<std::mutex> stats_lock(stats_mutex_);
      ++stats_.num_ooms;
    }
    throw_out_of_memory_locked(request_bytes);
  }
  if (request_bytes > small_limit_bytes_) return allocate_large(request_bytes, stream);
  if (!take_exact_start()) return allocate_small(request_bytes, stream);
  return allocate_large(request_bytes, stream, true);
}

void device_cache::end_exact_start_if_due_locked() noexcept {
  const std::int64_t taken = exact_start_initial_ - exact_start_remaining_.load(std::memory_order_relaxed);
  if (taken >= settings_.exact_start_allocations && reserved_high_water_bytes_ > settings_.small_program_reserved_bytes)
    exact_start_remaining_.store(0, std::memory_order_relaxed);
}

// Hot path (cache hit): one shard lock, the stats lock, one live-map shard lock.
void* device_cache::allocate_small(std::size_t request_bytes, stream_id stream) {
  stream_shard& shard = shard_for(stream);
  const std::size_t class_index = class_of(request_bytes);
  const std::size_t size_bytes = class_size_bytes(class_index);
  std::uintptr_t address = 0;
  slab* owner = nullptr;
  std::uint32_t slot = 0;
  bool placed = false;
  std::vector<slab*> surplus;
  std::size_t new_slab_bytes = 0;
  {
    std::lock_guard<spin_lock> lock(shard.mutex());
    placed = shard.try_allocate(class_index, &address, &owner, &slot);
    if (!placed && !shard.pending().empty()) {
      process_pending_small(shard, false, &surplus);
      placed = shard.try_allocate(class_index, &address, &owner, &slot);
    }
    if (placed)
      count_small_allocation(shard, size_bytes, request_bytes);
    else
      new_slab_bytes = slab_bytes(class_index, shard.class_slab_count(class_index));
  }
  if (!surplus.empty()) {
    std::lock_guard<std::mutex> lock(device_mutex_);
    for (slab* released : surplus) return_slab_locked(shard, released);
  }
  if (!placed) {
    // Slow path: a new slab from the large pool. It joins its shard before the device lock
    // is dropped, so a snapshot (which holds that lock) never sees its range in neither the
    // large pool nor a shard (Note [Consistent snapshots]).
    std::lock_guard<std::mutex> device_lock(device_mutex_);
    std::uintptr_t slab_address = 0;
    {
      // Slabs come and go with the size classes' load, not with the program's loop: they
      // stay out of loop plans (Note [Loop plans]).
      large_pool::unplanned_scope unplanned(large_);
      slab_address = place_large_locked(new_slab_bytes, request_bytes, stream);
    }
    std::unique_ptr<slab> fresh;
    try {
      fresh = make_slab(slab_address, class_index, new_slab_bytes);
      std::lock_guard<spin_lock> lock(shard.mutex());
      const std::size_t bytes = fresh->bytes;
      shard.add_slab(std::move(fresh));
      placed = shard.try_allocate(class_index, &address, &owner, &slot);
      count_small_allocation(shard, size_bytes, request_bytes);
      std::lock_guard<std::mutex> stats_lock(stats_mutex_);
      update(stats_.segment, pool_small, 1);
      stats_.reserved_bytes[pool_small].increase(as_signed(bytes));
      stats_.reserved_bytes[pool_large].decrease(as_signed(bytes));
    } catch (...) {
      if (fresh) large_.release(slab_address, fresh->bytes, stream_set(stream));
      throw;
    }
    // A new slab: small-pool growth, the moment to sample the peaks (no shard lock held).
    const small_sums sums = sum_small_stats();
    std::lock_guard<std::mutex> stats_lock(stats_mutex_);
    sample_peaks_locked(sums);
  }
  try {
    live_blocks_.insert(address, live_block{size_bytes, request_bytes, stream, device_, this, owner, &shard, slot, {}});
  } catch (...) {
    free_block(address, live_block{size_bytes, request_bytes, stream, device_, this, owner, &shard, slot, {}});
    throw;
  }
  return reinterpret_cast<void*>(address);
}

void* device_cache::allocate_large(std::size_t request_bytes, stream_id stream, bool exact_start) {
  shard_for(stream);  // checks the stream's device once per stream
  std::size_t size_bytes = rounded_request_bytes(request_bytes);
  std::uintptr_t address = 0;
  {
    std::lock_guard<std::mutex> lock(device_mutex_);
    {
      // Small requests placed exactly at the start go to slabs later: keeping them out of
      // loop plans lets the first step look like the next ones (Note [Loop plans]).
      std::optional<large_pool::unplanned_scope> unplanned;
      if (exact_start) unplanned.emplace(large_);
      address = place_large_locked(size_bytes, request_bytes, stream, &size_bytes);
    }
    if (exact_start) end_exact_start_if_due_locked();
    const small_sums sums = sum_small_stats();
    std::lock_guard<std::mutex> stats_lock(stats_mutex_);
    if (size_bytes >= settings_.max_split_bytes) stats_.oversize_allocations.increase(1);
    stats_.allocation[pool_large].increase(1);
    stats_.active[pool_large].increase(1);
    stats_.allocated_bytes[pool_large].increase(as_signed(size_bytes));
    stats_.active_bytes[pool_large].increase(as_signed(size_bytes));
    stats_.requested_bytes[pool_large].increase(as_signed(request_bytes));
    sample_peaks_locked(sums);
  }
  try {
    live_blocks_.insert(address, live_block{size_bytes, request_bytes, stream, device_, this, nullptr, nullptr, 0, {}});
  } catch (...) {
    free_block(address, live_block{size_bytes, request_bytes, stream, device_, this, nullptr, nullptr, 0, {}});
    throw;
  }
  return reinterpret_cast<void*>(address);
}

// Slow path, holds device_mutex_: best fit, then the OOM path of Note [Out of memory].
// Note [Out of memory]
// When the device (or the memory-fraction limit) refuses memory: synchronize the device
// once (counted in num_sync_all_streams), which completes every pending free and makes
// every free page idle; give back empty slabs; retry, so page moves and stitching can use
// every free page (Note [Stitching]). If that fails too, a compaction pass releases every
// cached page, mapping and handle, and the allocation is retried once more
// (num_alloc_retries counts the allocations that took this path). Only then fail
// (num_ooms) with PyTorch's message shape. Nothing is changed by a failure beyond the
// cache having been emptied.
std::uintptr_t device_cache::place_large_locked(std::size_t size_bytes, std::size_t request_bytes,
                                                stream_id stream, std::size_t* placed_bytes) {
  if (!pending_large_.empty()) process_pending_locked(false);
  std::uintptr_t address = 0;
  backend::status result = allocate_with_collection_locked(size_bytes, stream, &address, placed_bytes);
  bool synchronized = false;
  if (result == backend::status::out_of_memory) {
    {
      std::lock_guard<std::mutex> stats_lock(stats_mutex_);
      ++stats_.num_alloc_retries;
    }
    synchronized = synchronize_locked();
    settle_locked(synchronized);
    result = large_.allocate(size_bytes, stream, &address, placed_bytes);
    if (result == backend::status::out_of_memory && synchronized) {
      record_compaction_locked(large_.compact(compaction_pass{true, false, 0}));
      result = large_.allocate(size_bytes, stream, &address, placed_bytes);
    }
  }
  if (result == backend::status::out_of_memory && synchronized) {
    // Pages the failed attempt mapped are cached now; give them back too. Safe without
    // another synchronization: the retry synchronized, and the device lock has been held
    // since, so no block was freed into the cache meanwhile.
    large_.release_cached(0);
  }
  if (result == backend::status::ok) {
    release_above_threshold_locked();
    compact_if_due_locked();
  }
  account_device_locked();
  if (result == backend::status::ok) return address;
  if (result == backend::status::out_of_memory) {
    {
      std::lock_guard<std::mutex> stats_lock(stats_mutex_);
      ++stats_.num_ooms;
    }
    if (log_enabled(log_level::info))
      log_message(log_level::info, "device " + std::to_string(device_) + ": out of memory for " +
                                       format_bytes(request_bytes) + " after releasing the cache");
    throw_out_of_memory_locked(request_bytes);
  }
  // The caller gets the failure as a device_error; the log only traces it.
  if (log_enabled(log_level::debug))
    log_message(log_level::debug, "device " + std::to_string(device_) + ": " + backend_.last_error_text());
  throw device_error("fragless: device " + std::to_string(device_) + " failed to provide " +
                     format_bytes(size_bytes) + ": " + backend_.last_error_text());
}

// Holds device_mutex_. Note [Release threshold] (garbage collection): above the threshold,
// first try without growing; release idle cache and retry only if that fails.
backend::status device_cache::allocate_with_collection_locked(std::size_t size_bytes, stream_id stream,
                                                              std::uintptr_t* address,
                                                              std::size_t* placed_bytes) noexcept {
  const double fraction = settings_.garbage_collection_fraction;
  if (!(fraction > 0.0)) return large_.allocate(size_bytes, stream, address, placed_bytes);
  const std::size_t limit = large_.reserved_limit_bytes();
  const std::size_t allowed = static_cast<std::size_t>(std::min<std::uint64_t>(capacity_bytes_, limit));
  const auto target = static_cast<std::size_t>(fraction * static_cast<double>(allowed));
  const std::size_t reserved = large_.reserved_bytes();
  if (reserved <= target) return large_.allocate(size_bytes, stream, address, placed_bytes);
  large_.set_reserved_limit(std::min(limit, reserved));  // no growth on this attempt
  backend::status result = large_.allocate(size_bytes, stream, address, placed_bytes);
  large_.set_reserved_limit(limit);
  if (result != backend::status::out_of_memory) return result;
  const std::size_t cached = large_.cached_free_bytes();
  const std::size_t excess = large_.reserved_bytes() - std::min(large_.reserved_bytes(), target);
  large_.release_idle_cached(cached - std::min(cached, excess));
  return large_.allocate(size_bytes, stream, address, placed_bytes);
}

// Holds device_mutex_. Note [Release threshold].
void device_cache::release_above_threshold_locked() noexcept {
  if (settings_.release_threshold_bytes == SIZE_MAX) return;
  if (large_.cached_free_bytes() <= settings_.release_threshold_bytes) return;
  large_.release_idle_cached(settings_.release_threshold_bytes);
}

// Holds device_mutex_. The slow-path point after a large free or a slab's return.
void device_cache::release_after_free_locked() noexcept {
  if (settings_.release_threshold_bytes == SIZE_MAX && settings_.compact_threshold_bytes == SIZE_MAX) return;
  release_above_threshold_locked();
  compact_if_due_locked();
  account_device_locked();
}

void device_cache::throw_out_of_memory_locked(std::size_t request_bytes) {
  backend::memory_info info;
  if (backend_.get_memory_info(device_, &info) != backend::status::ok) info = {0, capacity_bytes_};
  std::int64_t allocated = 0;
  std::int64_t reserved = 0;
  {
    std::lock_guard<std::mutex> stats_lock(stats_mutex_);
    allocated = stats_.allocated_bytes[pool_all].current;
    reserved = stats_.reserved_bytes[pool_all].current;
  }
  const std::size_t limit = large_.reserved_limit_bytes();
  std::string hint;
  if (request_bytes > capacity_bytes_)
    hint = "The request is larger than the device.";
  else if (limit != SIZE_MAX && large_.reserved_bytes() + rounded_request_bytes(request_bytes) > limit)
    hint = "The reserved-memory limit of " + format_bytes(limit) +
           " (set_memory_fraction / max_cached_bytes) was reached; raise it to allow more.";
  else
    hint = "If reserved but unallocated memory is large, memory is fragmented: call empty_cache() or reduce "
           "the peak of live memory (e.g. a smaller batch).";
  throw out_of_memory_error(
      "CUDA out of memory. Tried to allocate " + format_bytes(request_bytes) + ". GPU " + std::to_string(device_) +
      " has a total capacity of " + format_bytes(info.total_bytes) + " of which " + format_bytes(info.free_bytes) +
      " is free. Of the allocated memory " + format_bytes(static_cast<std::uint64_t>(allocated)) +
      " is allocated by fragless, and " + format_bytes(static_cast<std::uint64_t>(std::max<std::int64_t>(0, reserved - allocated))) +
      " is reserved by fragless but unallocated. The largest free block is " +
      format_bytes(large_.largest_free_reserved_bytes()) + ". " + hint);
}

// Holds device_mutex_. Folds the large pool's reserved bytes and counters into the stats.
void device_cache::account_device_locked() noexcept {
  const std::size_t reserved = large_.reserved_bytes();
  reserved_high_water_bytes_ = std::max(reserved_high_water_bytes_, reserved);
  const std::size_t segments = large_.device_segment_count();
  const large_pool_counters& now = large_.counters();
  std::lock_guard<std::mutex> stats_lock(stats_mutex_);
  if (reserved != accounted_reserved_bytes_)
    update(stats_.reserved_bytes, pool_large, as_signed(reserved) - as_signed(accounted_reserved_bytes_));
  if (segments != accounted_segments_)
    update(stats_.segment, pool_large, as_signed(segments) - as_signed(accounted_segments_));
  stats_.num_device_alloc += now.device_alloc - accounted_counters_.device_alloc;
  stats_.num_device_free += now.device_free - accounted_counters_.device_free;
  stats_.num_map += now.map - accounted_counters_.map;
  stats_.num_unmap += now.unmap - accounted_counters_.unmap;
  stats_.map_ns += now.map_ns - accounted_counters_.map_ns;
  stats_.unmap_ns += now.unmap_ns - accounted_counters_.unmap_ns;
  stats_.num_cross_stream_waits += now.cross_stream_waits - accounted_counters_.cross_stream_waits;
  stats_.num_sync_all_streams += now.device_syncs - accounted_counters_.device_syncs;
  stats_.num_page_moves += now.page_moves - accounted_counters_.page_moves;
  stats_.num_stitched_allocations += now.stitched_allocations - accounted_counters_.stitched_allocations;
  const loop_plan_counters& plans = large_.loop_plan_counts();
  stats_.num_loop_plans += plans.plans_built - accounted_plan_counters_.plans_built;
  stats_.num_loop_plans_abandoned += plans.plans_abandoned - accounted_plan_counters_.plans_abandoned;
  stats_.num_planned_allocations += plans.planned_allocations - accounted_plan_counters_.planned_allocations;
  accounted_plan_counters_ = plans;
  stats_.pages_mapped.current = static_cast<std::int64_t>(large_.pages().mapped_count());
  stats_.pages_mapped.peak = std::max(stats_.pages_mapped.peak, stats_.pages_mapped.current);
  stats_.num_events_created = events_.created_count();
  accounted_reserved_bytes_ = reserved;
  accounted_segments_ = segments;
  accounted_counters_ = now;
}

// ---------------------------------------------------------------------------------------
// Free

std::vector<void*> device_cache::record_use_events(const live_block& block) noexcept {
  std::vector<void*> events;
  try {
    for (stream_id other : block.other_streams.streams()) {
      if (other == block.stream) continue;
      if (events_.is_retired(other)) {
        // Note [Retired streams]: no stream to record on; done, or a device synchronization.
        if (events_.retired_work_pending(other)) events.push_back(nullptr);
        continue;
      }
      void* event = events_.acquire();
      if (event != nullptr && backend_.record_event(device_, event, other) != backend::status::ok) {
        events_.release(event);
        event = nullptr;  // completes only with a device synchronization
      }
      events.push_back(event);
    }
  } catch (...) {
    events.assign(1, nullptr);
  }
  return events;
}

bool device_cache::events_complete(const std::vector<void*>& events) noexcept {
  for (void* event : events)
    if (event == nullptr || backend_.query_event(device_, event) != backend::status::ok) return false;
  return true;
}

// Large blocks only (small ones count in their shard). `deactivate`: the block also
// stops being active (not pending).
void device_cache::record_free_stats(const live_block& block, bool deactivate) noexcept {
  std::lock_guard<std::mutex> stats_lock(stats_mutex_);
  stats_.allocation[pool_large].decrease(1);
  stats_.allocated_bytes[pool_large].decrease(as_signed(block.size_bytes));
  stats_.requested_bytes[pool_large].decrease(as_signed(block.requested_bytes));
  if (block.size_bytes >= settings_.max_split_bytes) stats_.oversize_allocations.decrease(1);
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

// Hot path for small blocks: one shard lock.
void device_cache::free_block(std::uintptr_t address, live_block&& block) noexcept {
  const bool wait_for_uses = !block.other_streams.empty() && !settings_.unsafe_skip_stream_waits &&
                             block.other_streams.foreign_to(block.stream);
  std::vector<void*> events;
  if (wait_for_uses) events = record_use_events(block);
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
          shard.pending().push_back(pending_object{block.owner, block.slot, block.size_bytes, std::move(events)});
        } catch (...) {
          // No host memory for the pending entry: the object stays unavailable (and
          // active) rather than unsafe.
        }
        return;
      }
      surplus = shard.free_object(block.owner, block.slot);
      counters.active.subtract(1);
      counters.active_bytes.subtract(as_signed(block.size_bytes));
    }
    if (surplus != nullptr) {
      std::lock_guard<std::mutex> lock(device_mutex_);
      return_slab_locked(shard, surplus);
      release_after_free_locked();
    }
    return;
  }
  std::lock_guard<std::mutex> lock(device_mutex_);
  if (wait_for_uses) {
    record_free_stats(block, false);
    try {
      pending_large_.push_back(pending_large{address, block.size_bytes, block.stream, std::move(events)});
    } catch (...) {
      // see above: unavailable rather than unsafe
    }
    return;
  }
  stream_set streams;
  try {
    streams = stream_set(block.stream);
  } catch (...) {
  }
  large_.release(address, block.size_bytes, streams);
  record_free_stats(block, true);
  release_after_free_locked();
}

// Holds device_mutex_ (the slab is already unlinked from its shard's lists).
void device_cache::return_slab_locked(stream_shard& shard, slab* released) noexcept {
  std::unique_ptr<slab> owned;
  {
    std::lock_guard<spin_lock> lock(shard.mutex());
    owned = shard.adopt_released(released);
  }
  stream_set streams;
  try {
    streams = stream_set(shard.stream());
  } catch (...) {
  }
  large_.release(owned->address, owned->bytes, streams);
  std::lock_guard<std::mutex> stats_lock(stats_mutex_);
  update(stats_.segment, pool_small, -1);
  stats_.reserved_bytes[pool_small].decrease(as_signed(owned->bytes));
  stats_.reserved_bytes[pool_large].increase(as_signed(owned->bytes));
}

// Holds device_mutex_.
void device_cache::process_pending_locked(bool device_synchronized) noexcept {
  if (device_synchronized) pending_need_sync_ = false;
  auto keep = pending_large_.begin();
  for (auto at = pending_large_.begin(); at != pending_large_.end(); ++at) {
    if (!device_synchronized && !events_complete(at->events)) {
      if (keep != at) *keep = std::move(*at);
      ++keep;
      continue;
    }
    for (void* event : at->events) events_.release(event);
    stream_set streams;
    if (!device_synchronized) {
      try {
        streams = stream_set(at->stream);
      } catch (...) {
      }
    }
    large_.release(at->address, at->size_bytes, streams);
    std::lock_guard<std::mutex> stats_lock(stats_mutex_);
    stats_.active[pool_large].decrease(1);
    stats_.active_bytes[pool_large].decrease(as_signed(at->size_bytes));
  }
  pending_large_.erase(keep, pending_large_.end());
}

// Holds the shard's mutex. Surplus-empty slabs are unlinked and handed to the caller.
void device_cache::process_pending_small(stream_shard& shard, bool device_synchronized,
                                         std::vector<slab*>* surplus) noexcept {
  auto& pending = shard.pending();
  auto keep = pending.begin();
  for (auto at = pending.begin(); at != pending.end(); ++at) {
    if (!device_synchronized && !events_complete(at->events)) {
      if (keep != at) *keep = std::move(*at);
      ++keep;
      continue;
    }
    for (void* event : at->events) events_.release(event);
    slab* released = shard.free_object(at->owner, at->slot);
    if (released != nullptr) {
      try {
        surplus->push_back(released);
      } catch (...) {
      }
    }
    shard.counters().active.subtract(1);
    shard.counters().active_bytes.subtract(as_signed(at->size_bytes));
  }
  pending.erase(keep, pending.end());
}

}  // namespace fragless::core
