// The counters the allocator keeps for each device, with PyTorch DeviceStats meanings
// (plus map/unmap and cross-stream figures). Invariant: a stat's current == allocated -
// freed (until reset_accumulated_stats), and peak >= current. The allocator updates
// them under the owning device's stats lock; callers get copies.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

namespace fragless {

struct stat {
  std::int64_t current = 0;
  std::int64_t peak = 0;
  std::int64_t allocated = 0;
  std::int64_t freed = 0;

  void increase(std::int64_t amount) noexcept {
    current += amount;
    allocated += amount;
    peak = std::max(peak, current);
  }
  void decrease(std::int64_t amount) noexcept {
    current -= amount;
    freed += amount;
  }
  void reset_peak() noexcept { peak = current; }
  void reset_accumulated() noexcept {
    allocated = 0;
    freed = 0;
  }
};

enum pool_kind : std::size_t { pool_all = 0, pool_small = 1, pool_large = 2 };
using pool_stat = std::array<stat, 3>;

// Note [Stats pools]
// "small" is the size-class slab pool, "large" the best-fit index. Slabs are counted as
// small-pool segments (segment.small, reserved_bytes.small = slab bytes); the device's
// mapped pages (VMM) or cudaMalloc segments make up segment.large, and
// reserved_bytes.large = device reserved bytes - slab bytes, so that for every stat
// all == small + large.
struct usage_stats {
  pool_stat allocation, segment, active, inactive_split, allocated_bytes, reserved_bytes, active_bytes,
      inactive_split_bytes, requested_bytes;
  stat oversize_allocations, oversize_segments;
  std::int64_t num_alloc_retries = 0;
  std::int64_t num_ooms = 0;
  std::int64_t num_sync_all_streams = 0;
  std::int64_t num_device_alloc = 0;
  std::int64_t num_device_free = 0;
  std::int64_t num_map = 0;
  std::int64_t num_unmap = 0;
  std::int64_t map_ns = 0;
  std::int64_t unmap_ns = 0;
  std::int64_t num_cross_stream_waits = 0;
  std::int64_t max_split_size = -1;

  template <typename F>
  void for_each_pool_stat(F&& f) {
    for (pool_stat* s : {&allocation, &segment, &active, &inactive_split, &allocated_bytes, &reserved_bytes,
                         &active_bytes, &inactive_split_bytes, &requested_bytes})
      for (stat& one : *s) f(one);
    f(oversize_allocations);
    f(oversize_segments);
  }
  void reset_peak() noexcept {
    for_each_pool_stat([](stat& s) { s.reset_peak(); });
  }
  void reset_accumulated() noexcept {
    for_each_pool_stat([](stat& s) { s.reset_accumulated(); });
    num_alloc_retries = num_ooms = num_sync_all_streams = num_device_alloc = num_device_free = 0;
    num_map = num_unmap = map_ns = unmap_ns = num_cross_stream_waits = 0;
  }
};

// Adds `amount` to the pool's stat and to "all".
inline void update(pool_stat& s, pool_kind pool, std::int64_t amount) noexcept {
  if (amount >= 0) {
    s[pool_all].increase(amount);
    s[pool].increase(amount);
  } else {
    s[pool_all].decrease(-amount);
    s[pool].decrease(-amount);
  }
}

}  // namespace fragless
