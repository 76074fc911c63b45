// The large-block slow path of a device cache (every function holds device_mutex_):
// placement with garbage collection, the release threshold, and the out-of-memory path.
// Invariant: an allocation fails (out_of_memory_error) only after the device was
// synchronized, empty slabs returned and every cached page released (Note [Out of memory]).
#include <algorithm>

#include "core/device_cache.hpp"
#include "core/log.hpp"
#include "core/size_classes.hpp"
#include "fragless/options.hpp"

namespace fragless::core {

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
    ++stats_.num_alloc_retries;
    synchronized = synchronize_locked();
    settle_locked(synchronized);
    result = large_->allocate(size_bytes, stream, &address, placed_bytes);
    if (result == backend::status::out_of_memory && synchronized) {
      record_compaction_locked(large_->compact(compaction_pass{false, 0}));
      result = large_->allocate(size_bytes, stream, &address, placed_bytes);
    }
  }
  if (result == backend::status::out_of_memory && synchronized) {
    // Pages the failed attempt mapped are cached now; give them back too. Safe without
    // another synchronization: the retry synchronized, and the device lock has been held
    // since, so no block was freed into the cache meanwhile.
    large_->release_cached(0);
  }
  if (result == backend::status::ok) {
    give_plan_room_locked();
    release_above_threshold_locked();
    compact_if_due_locked();
  }
  account_device_locked();
  if (result == backend::status::ok) return address;
  if (result == backend::status::out_of_memory) {
    ++stats_.num_ooms;
    if (log_enabled(log_level::info))
      log_message(log_level::info, "device " + std::to_string(device_) + ": out of memory for " +
                                       format_bytes_readable(request_bytes) + " after releasing the cache");
    throw_out_of_memory_locked(request_bytes);
  }
  // The caller gets the failure as a device_error; the log only traces it.
  if (log_enabled(log_level::debug))
    log_message(log_level::debug, "device " + std::to_string(device_) + ": " + backend_.last_error_text());
  throw device_error("fragless: device " + std::to_string(device_) + " failed to provide " +
                     format_bytes_readable(size_bytes) + ": " + backend_.last_error_text());
}

// Holds device_mutex_. Note [Release threshold] (garbage collection): above the threshold,
// first try without growing; release idle cache and retry only if that fails.
backend::status device_cache::allocate_with_collection_locked(std::size_t size_bytes, stream_id stream,
                                                              std::uintptr_t* address,
                                                              std::size_t* placed_bytes) noexcept {
  const double fraction = settings_.conf.garbage_collection_threshold;
  if (!(fraction > 0.0)) return large_->allocate(size_bytes, stream, address, placed_bytes);
  const std::size_t limit = large_->reserved_limit_bytes();
  const std::size_t allowed = static_cast<std::size_t>(std::min<std::uint64_t>(capacity_bytes_, limit));
  const auto target = static_cast<std::size_t>(fraction * static_cast<double>(allowed));
  const std::size_t reserved = large_->reserved_bytes();
  if (reserved <= target) return large_->allocate(size_bytes, stream, address, placed_bytes);
  large_->set_reserved_limit(std::min(limit, reserved));  // no growth on this attempt
  backend::status result = large_->allocate(size_bytes, stream, address, placed_bytes);
  large_->set_reserved_limit(limit);
  if (result != backend::status::out_of_memory) return result;
  const std::size_t cached = large_->cached_free_bytes();
  const std::size_t excess = large_->reserved_bytes() - std::min(large_->reserved_bytes(), target);
  large_->release_idle_cached(cached - std::min(cached, excess));
  return large_->allocate(size_bytes, stream, address, placed_bytes);
}

// Holds device_mutex_. Note [Release threshold].
void device_cache::release_above_threshold_locked() noexcept {
  if (settings_.conf.release_threshold_bytes == unlimited_bytes) return;
  if (large_->cached_free_bytes() <= settings_.conf.release_threshold_bytes) return;
  large_->release_idle_cached(settings_.conf.release_threshold_bytes);
}

// Holds device_mutex_. The slow-path point after a large free or a slab's return.
void device_cache::release_after_free_locked() noexcept {
  give_plan_room_locked();
  if (settings_.conf.release_threshold_bytes == unlimited_bytes && settings_.conf.compact_threshold_bytes == unlimited_bytes) return;
  release_above_threshold_locked();
  compact_if_due_locked();
  account_device_locked();
}

// Holds device_mutex_. Note [Loop plans]: the empty slabs the small pool keeps as a cache
// lie wherever best fit put them, and between two steps of a loop they are often all that
// is live there: they would split the free space a plan's range needs over the loop's own
// pages. settle_locked gives them back (and settles what completed); the large pool then
// chooses the range.
void device_cache::give_plan_room_locked() noexcept {
  if (!large_->plan_wants_room()) return;
  settle_locked(false);
  large_->room_given();
}

void device_cache::throw_out_of_memory_locked(std::size_t request_bytes) {
  backend::memory_info info;
  if (backend_.get_memory_info(device_, &info) != backend::status::ok) info = {0, capacity_bytes_};
  const std::int64_t allocated = stats_.allocated_bytes[pool_all].current;
  const std::int64_t reserved = stats_.reserved_bytes[pool_all].current;
  const std::size_t limit = large_->reserved_limit_bytes();
  std::string hint;
  if (request_bytes > capacity_bytes_)
    hint = "The request is larger than the device.";
  else if (limit != SIZE_MAX && large_->reserved_bytes() + rounded_request_bytes(request_bytes) > limit)
    hint = "The reserved-memory limit of " + format_bytes_readable(limit) +
           " (set_memory_fraction / max_cached_bytes) was reached; raise it to allow more.";
  else
    hint = "If reserved but unallocated memory is large, memory is fragmented: call empty_cache() or reduce "
           "the peak of live memory (e.g. a smaller batch).";
  throw out_of_memory_error(
      "CUDA out of memory. Tried to allocate " + format_bytes_readable(request_bytes) + ". GPU " + std::to_string(device_) +
      " has a total capacity of " + format_bytes_readable(info.total_bytes) + " of which " + format_bytes_readable(info.free_bytes) +
      " is free. Of the allocated memory " + format_bytes_readable(static_cast<std::uint64_t>(allocated)) +
      " is allocated by fragless, and " + format_bytes_readable(static_cast<std::uint64_t>(std::max<std::int64_t>(0, reserved - allocated))) +
      " is reserved by fragless but unallocated. The largest free block is " +
      format_bytes_readable(large_->largest_free_reserved_bytes()) + ". " + hint);
}

}  // namespace fragless::core
