// The full-walk check every allocator test runs: the snapshot is well formed (blocks
// exactly cover their segments, segments disjoint: check_snapshot), every current stat the
// snapshot implies equals the allocator's live counter (stats_from_snapshot +
// compare_current, like PyTorch's _check_memory_stat_consistency), handed-out blocks are
// 512 B aligned, and the running totals add up (current == allocated - freed).
// Call it only while no other thread allocates or frees.
#pragma once

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "fragless/fragless.hpp"

namespace fragless::testing {

inline std::string join_lines(const std::vector<std::string>& lines) {
  std::string text;
  for (std::size_t i = 0; i < lines.size() && i < 20; ++i) text += lines[i] + "\n";
  return text;
}

inline void check_consistency(const memory_snapshot& snap, const device_stats& stats, int device = 0) {
  const std::vector<std::string> problems = check_snapshot(snap);
  INFO(join_lines(problems));
  REQUIRE(problems.empty());
  const device_stats walked = stats_from_snapshot(snap, device);
  const std::vector<std::string> differences = compare_current(walked, stats, true);
  INFO(join_lines(differences));
  REQUIRE(differences.empty());
  for (const snapshot_segment& segment : snap.segments)
    for (const snapshot_block& block : segment.blocks)
      if (block.state != block_state::free) REQUIRE(block.address % 512 == 0);
  for (const pool_stat* s : {&stats.allocation, &stats.allocated_bytes, &stats.requested_bytes, &stats.active,
                             &stats.active_bytes, &stats.reserved_bytes})
    for (const stat& one : *s) {
      CHECK(one.current == one.allocated - one.freed);
      CHECK(one.peak >= one.current);
    }
  // Somewhat independent of the walker: all == small + large for the running counters.
  CHECK(stats.allocated_bytes[pool_all].current ==
        stats.allocated_bytes[pool_small].current + stats.allocated_bytes[pool_large].current);
  CHECK(stats.reserved_bytes[pool_all].current ==
        stats.reserved_bytes[pool_small].current + stats.reserved_bytes[pool_large].current);
}

// The end of a fault or workload test: consistent before and after the cache gives back
// everything it holds, with nothing allocated or reserved left. `Cache` is a device cache
// (snapshot(), stats(), release_cache(device)).
template <typename Cache>
inline void check_releases_everything(Cache& cache) {
  check_consistency(cache.snapshot(), cache.stats());
  cache.release_cache(0);
  check_consistency(cache.snapshot(), cache.stats());
  CHECK(cache.stats().allocated_bytes[pool_all].current == 0);
  CHECK(cache.stats().reserved_bytes[pool_all].current == 0);
}

}  // namespace fragless::testing
