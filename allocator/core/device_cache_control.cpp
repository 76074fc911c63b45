// One device's cache control: empty_cache/trim, compaction passes (explicit, automatic,
// background) and the memory fraction (see device_cache.hpp, Note [Compaction] in
// vmm_pool_compaction.cpp). Invariant: every pass runs under device_mutex_, and only a pass that
// synchronized the device first treats memory as idle without asking its streams.
#include "backend/capture_aware_backend.hpp"
#include "core/device_cache.hpp"
#include "core/log.hpp"
#include "core/monotonic_clock.hpp"

namespace fragless::core {
std::size_t device_cache::release_cache(std::size_t bytes_to_keep) {
  std::lock_guard<std::mutex> lock(device_mutex_);
  return release_cache_locked(bytes_to_keep);
}

// Note [Synchronized settle]
// A device synchronization completes the work queued before it and nothing queued after
// it. The device lock, held from the synchronization through the settling that follows,
// keeps large frees out, so every free range and pending large free is covered by it. The
// small pool's hot path takes shard locks only and goes on meanwhile: another thread can
// launch work on a small object and free it -- leaving its slab empty, or pending on other
// streams -- after the synchronization and before settle_locked reaches its shard. So each
// shard numbers its releases (a pending free, a slab left empty), synchronize_locked()
// marks every shard's number before synchronizing, and a synchronized settle completes
// pending objects without their events, and gives empty slabs back as idle, only up to
// that mark. A later one waits for its events like any pending free, and its slab goes
// back remembering the shard's stream: forget_streams() runs before the slabs return, not
// after, and a compaction pass asks the streams a free range still remembers even after a
// synchronization (only ranges freed after it remember any). Found by the property test
// (threads and streams, cache options on): simcuda saw a page unmapped while a kernel
// another thread had just queued on a small object in it still wrote there.

// Holds device_mutex_. Settles pending frees and gives empty slabs back to the large pool;
// with `synchronized` (the device was synchronized) what the synchronization covered
// completes now (Note [Synchronized settle]).
void device_cache::settle_locked(bool synchronized) noexcept {
  if (synchronized) large_->forget_streams();
  process_pending_locked(synchronized);
  try {
    std::shared_lock<std::shared_mutex> shards_lock(shards_mutex_);
    for (auto& [stream, shard] : shards_) {
      std::vector<slab*> slabs;
      std::vector<std::unique_ptr<slab>> empty;
      {
        std::lock_guard<spin_lock> lock(shard->mutex());
        process_pending_small(*shard, synchronized, &slabs);
        try {
          empty = shard->take_empty_slabs();
        } catch (...) {
          // No host memory for the list: no slab was taken, the empty ones stay cached; the
          // surplus ones in `slabs`, already out of the shard's lists, still go back below
          // (Note [Pending without host memory]).
        }
      }
      for (slab* released : slabs) return_slab_locked(*shard, released);
      for (const auto& owned : empty) {
        const bool idle = synchronized && shard->covered_by_synchronization(owned->emptied_at_release);
        slab_to_large_pool_locked(*owned, shard->stream(), idle);
      }
    }
  } catch (...) {
  }
}

// Holds device_mutex_. Marks what the synchronization will cover (Note [Synchronized
// settle]), then synchronizes the device; false (and logged) when that fails.
bool device_cache::synchronize_locked() noexcept {
  if (backend::capture_underway()) return false;  // Note [Capture underway]: expected, not worth a warning
  {
    std::shared_lock<std::shared_mutex> shards_lock(shards_mutex_);
    for (auto& [stream, shard] : shards_) {
      std::lock_guard<spin_lock> lock(shard->mutex());
      shard->mark_synchronization();
    }
  }
  const bool synchronized = backend_.synchronize_device(device_) == backend::status::ok;
  if (!synchronized) {
    try {
      log_message(log_level::warn, "device " + std::to_string(device_) +
                                       ": synchronization failed, cached memory kept: " + backend_.last_error_text());
    } catch (...) {
    }
    return false;
  }
  ++stats_.num_sync_all_streams;
  return true;
}

// Holds device_mutex_. See Note [Out of memory] and Note [Page cache].
std::size_t device_cache::release_cache_locked(std::size_t bytes_to_keep) noexcept {
  const bool synchronized = synchronize_locked();
  settle_locked(synchronized);
  std::size_t released = 0;
  if (synchronized) released = large_->release_cached(bytes_to_keep);
  account_device_locked();
  return released;
}

// Note [Compaction]: the explicit pass. No device synchronization: memory a stream may
// still touch stays until a later pass finds it idle.
void device_cache::unmap_dormant_ranges() noexcept {
  std::lock_guard<std::mutex> lock(device_mutex_);
  large_->unmap_dormant_ranges();
}

compact_result device_cache::compact() noexcept {
  std::lock_guard<std::mutex> lock(device_mutex_);
  settle_locked(false);
  const compaction_outcome outcome =
      large_->compact(compaction_pass{false, large_->cached_pages_kept_bytes()});
  record_compaction_locked(outcome);
  return compact_result{outcome.released_bytes, outcome.unmapped_pages};
}

// Holds device_mutex_.
void device_cache::record_compaction_locked(const compaction_outcome& outcome) noexcept {
  account_device_locked();
  ++stats_.num_compactions;
  stats_.compaction_released_bytes += as_signed(outcome.released_bytes);
  stats_.compaction_unmapped_pages += as_signed(outcome.unmapped_pages);
}

// Holds device_mutex_. Note [Compaction]: the automatic pass, at most once per interval,
// only when more than compact_threshold_bytes are cached, and only over pages that stayed
// free through the last compaction_age_passes automatic passes.
void device_cache::compact_if_due_locked() noexcept {
  if (settings_.conf.compact_threshold_bytes == unlimited_bytes) return;
  // This runs on every large allocation and free: the cached bytes first, then the coarse
  // clock (a precise reading cost about 5 % of a steady corpus pass's host time).
  if (large_->cached_free_bytes() <= settings_.conf.compact_threshold_bytes) return;
  const std::int64_t now = coarse_now_ns();
  if (now - last_compaction_ns_ < settings_.compaction_interval_ns) return;
  last_compaction_ns_ = now;
  const compaction_outcome outcome =
      large_->compact(compaction_pass{true, settings_.conf.compact_threshold_bytes});
  large_->advance_epoch();
  record_compaction_locked(outcome);
}

void device_cache::start_background_compaction() {
  if (!settings_.conf.background_compaction || settings_.conf.compact_threshold_bytes == unlimited_bytes) return;
  background_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(background_mutex_);
    const auto interval = std::chrono::nanoseconds(settings_.compaction_interval_ns);
    while (!background_cv_.wait_for(lock, interval, [this] { return stop_background_; })) {
      std::lock_guard<std::mutex> device_lock(device_mutex_);
      compact_if_due_locked();
    }
  });
}

void device_cache::stop_background_compaction() noexcept {
  if (!background_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(background_mutex_);
    stop_background_ = true;
  }
  background_cv_.notify_all();
  try {
    background_.join();
  } catch (...) {
  }
}

void device_cache::set_memory_fraction(double fraction) {
  if (!(fraction > 0.0 && fraction <= 1.0))
    throw invalid_argument_error("fragless: memory fraction must be in (0, 1], got " + std::to_string(fraction));
  std::lock_guard<std::mutex> lock(device_mutex_);
  // The tighter of the fraction and the max_cached_bytes option.
  large_->set_reserved_limit(std::min(settings_.conf.max_cached_bytes,
                                     static_cast<std::size_t>(fraction * static_cast<double>(capacity_bytes_))));
}

}  // namespace fragless::core
