// The full-walk check every allocator test runs: from a snapshot alone, recompute every
// stat that the snapshot determines and compare with the allocator's counters (like
// PyTorch's _check_memory_stat_consistency), and check the layout: live blocks 512 B
// aligned, disjoint, inside a slab or a reserved large region; slabs inside reserved
// regions. Call it only while no other thread allocates or frees.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "fragless/fragless.hpp"

namespace fragless::testing {

struct walk_totals {
  std::int64_t allocation[3] = {0, 0, 0};
  std::int64_t allocated_bytes[3] = {0, 0, 0};
  std::int64_t requested_bytes[3] = {0, 0, 0};
  std::int64_t active[3] = {0, 0, 0};
  std::int64_t active_bytes[3] = {0, 0, 0};
  std::int64_t segment[3] = {0, 0, 0};
  std::int64_t reserved_bytes[3] = {0, 0, 0};
};

inline walk_totals check_consistency(const device_snapshot& snap, const usage_stats& stats) {
  walk_totals totals;
  struct span {
    std::uintptr_t start, end;
  };
  std::vector<span> regions, live;
  std::vector<const segment_info*> slabs;
  std::int64_t device_reserved = 0;
  for (const segment_info& segment : snap.segments) {
    const std::size_t pool = segment.pool == memory_pool::small ? pool_small : pool_large;
    totals.segment[pool] += 1;
    totals.segment[pool_all] += 1;
    if (segment.pool == memory_pool::large) {
      regions.push_back({segment.address, segment.address + segment.size_bytes});
      device_reserved += static_cast<std::int64_t>(segment.size_bytes);
    } else {
      slabs.push_back(&segment);
      totals.reserved_bytes[pool_small] += static_cast<std::int64_t>(segment.size_bytes);
    }
    std::uintptr_t previous_end = segment.address;
    for (const block_info& block : segment.blocks) {
      INFO("block at " << block.address << " size " << block.size_bytes << " in segment " << segment.address);
      REQUIRE(block.address >= previous_end);  // in order, disjoint
      REQUIRE(block.address + block.size_bytes <= segment.address + segment.size_bytes);
      previous_end = block.address + block.size_bytes;
      if (block.state == block_state::inactive) continue;
      REQUIRE(block.address % 512 == 0);
      live.push_back({block.address, block.address + block.size_bytes});
      for (std::size_t p : {pool, std::size_t{pool_all}}) {
        totals.active[p] += 1;
        totals.active_bytes[p] += static_cast<std::int64_t>(block.size_bytes);
        if (block.state == block_state::active_allocated) {
          totals.allocation[p] += 1;
          totals.allocated_bytes[p] += static_cast<std::int64_t>(block.size_bytes);
          totals.requested_bytes[p] += static_cast<std::int64_t>(block.requested_bytes);
        }
      }
    }
  }
  totals.reserved_bytes[pool_all] = device_reserved;
  totals.reserved_bytes[pool_large] = device_reserved - totals.reserved_bytes[pool_small];
  // Slabs lie inside reserved regions; live blocks never overlap.
  std::sort(regions.begin(), regions.end(), [](span a, span b) { return a.start < b.start; });
  auto inside_region = [&](std::uintptr_t start, std::uintptr_t end) {
    auto at = std::upper_bound(regions.begin(), regions.end(), start, [](std::uintptr_t v, span s) { return v < s.start; });
    if (at == regions.begin()) return false;
    --at;
    return start >= at->start && end <= at->end;
  };
  for (const segment_info* slab : slabs) {
    INFO("slab at " << slab->address);
    REQUIRE(inside_region(slab->address, slab->address + slab->size_bytes));
  }
  std::sort(live.begin(), live.end(), [](span a, span b) { return a.start < b.start; });
  for (std::size_t i = 1; i < live.size(); ++i) REQUIRE(live[i - 1].end <= live[i].start);
  for (const span& block : live) {
    // Large blocks must be inside a region (slab objects are inside a slab, itself inside).
    REQUIRE(inside_region(block.start, block.end));
  }
  for (std::size_t p : {std::size_t{pool_all}, std::size_t{pool_small}, std::size_t{pool_large}}) {
    INFO("pool " << p);
    CHECK(stats.allocation[p].current == totals.allocation[p]);
    CHECK(stats.allocated_bytes[p].current == totals.allocated_bytes[p]);
    CHECK(stats.requested_bytes[p].current == totals.requested_bytes[p]);
    CHECK(stats.active[p].current == totals.active[p]);
    CHECK(stats.active_bytes[p].current == totals.active_bytes[p]);
    CHECK(stats.segment[p].current == totals.segment[p]);
    CHECK(stats.reserved_bytes[p].current == totals.reserved_bytes[p]);
    CHECK(stats.allocated_bytes[p].peak >= stats.allocated_bytes[p].current);
    CHECK(stats.reserved_bytes[p].peak >= stats.reserved_bytes[p].current);
    CHECK(stats.allocated_bytes[p].allocated - stats.allocated_bytes[p].freed == stats.allocated_bytes[p].current);
  }
  return totals;
}

}  // namespace fragless::testing
