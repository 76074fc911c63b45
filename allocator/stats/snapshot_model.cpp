// Snapshot checks and the stats-from-snapshot walker, Note [Stats from snapshot] in
// fragless/stats_snapshot.hpp. Invariant: the walker reads only the snapshot, so any
// difference from the live counters is a bookkeeping bug on one side.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

#include "fragless/stats_snapshot.hpp"

namespace fragless {
namespace {

std::string hex(std::uint64_t value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "0x%llx", static_cast<unsigned long long>(value));
  return buffer;
}

std::int64_t as_signed(std::uint64_t value) { return static_cast<std::int64_t>(value); }

// A stat that only has a current value: peak = allocated = current, freed = 0.
void add_current(stat& s, std::int64_t amount) {
  s.current += amount;
  s.peak = s.current;
  s.allocated = s.current;
}

void add_pool(pool_stat& group, pool_kind pool, std::int64_t amount) {
  add_current(group[pool_all], amount);
  add_current(group[pool], amount);
}

}  // namespace

std::string_view to_pytorch_state(block_state state) noexcept {
  switch (state) {
    case block_state::allocated: return "active_allocated";
    case block_state::pending_free: return "active_pending_free";
    case block_state::free: break;
  }
  return "inactive";
}

std::vector<std::string> check_snapshot(const memory_snapshot& snapshot) {
  std::vector<std::string> problems;
  std::map<int, std::vector<const snapshot_segment*>> by_device;
  for (const snapshot_segment& segment : snapshot.segments) {
    const std::string where = "segment " + hex(segment.address) + " (device " + std::to_string(segment.device) + ")";
    if (segment.device < 0 || segment.device >= snapshot.device_count)
      problems.push_back(where + ": device outside 0.." + std::to_string(snapshot.device_count - 1));
    if (segment.pool != pool_small && segment.pool != pool_large) problems.push_back(where + ": pool is not small or large");
    if (segment.size_bytes == 0) problems.push_back(where + ": size 0");
    if (segment.address + segment.size_bytes < segment.address) problems.push_back(where + ": wraps the address space");
    std::uint64_t expected = segment.address;
    bool contiguous = true;
    for (const snapshot_block& block : segment.blocks) {
      if (block.address != expected) {
        problems.push_back(where + ": block " + hex(block.address) + " should start at " + hex(expected));
        contiguous = false;
        break;
      }
      if (block.size_bytes == 0) problems.push_back(where + ": block " + hex(block.address) + " has size 0");
      if (block.state == block_state::allocated && block.requested_bytes > block.size_bytes)
        problems.push_back(where + ": block " + hex(block.address) + " requested more than its size");
      expected = block.address + block.size_bytes;
    }
    if (contiguous && expected != segment.address + segment.size_bytes)
      problems.push_back(where + ": blocks cover up to " + hex(expected) + ", segment ends at " +
                         hex(segment.address + segment.size_bytes));
    by_device[segment.device].push_back(&segment);
  }
  for (auto& [device, segments] : by_device) {
    std::sort(segments.begin(), segments.end(),
              [](const snapshot_segment* a, const snapshot_segment* b) { return a->address < b->address; });
    for (std::size_t i = 1; i < segments.size(); ++i)
      if (segments[i - 1]->address + segments[i - 1]->size_bytes > segments[i]->address)
        problems.push_back("segments " + hex(segments[i - 1]->address) + " and " + hex(segments[i]->address) +
                           " overlap (device " + std::to_string(device) + ")");
  }
  return problems;
}

device_stats stats_from_snapshot(const memory_snapshot& snapshot, int device) {
  device_stats stats{};
  stats.max_split_size = snapshot.max_split_size;
  const bool has_split_limit = snapshot.max_split_size >= 0;
  const auto oversize = [&](std::uint64_t bytes) {
    return has_split_limit && as_signed(bytes) >= snapshot.max_split_size;
  };
  for (const snapshot_segment& segment : snapshot.segments) {
    if (segment.device != device) continue;
    const pool_kind pool = segment.pool == pool_small ? pool_small : pool_large;
    add_pool(stats.segment, pool, 1);
    add_pool(stats.reserved_bytes, pool, as_signed(segment.size_bytes));
    if (oversize(segment.size_bytes)) add_current(stats.oversize_segments, 1);
    const bool is_split = segment.blocks.size() > 1;
    for (const snapshot_block& block : segment.blocks) {
      const std::int64_t size = as_signed(block.size_bytes);
      switch (block.state) {
        case block_state::allocated:
          add_pool(stats.allocation, pool, 1);
          add_pool(stats.allocated_bytes, pool, size);
          add_pool(stats.requested_bytes, pool, as_signed(block.requested_bytes));
          add_pool(stats.active, pool, 1);
          add_pool(stats.active_bytes, pool, size);
          if (oversize(block.size_bytes)) add_current(stats.oversize_allocations, 1);
          break;
        case block_state::pending_free:
          add_pool(stats.active, pool, 1);
          add_pool(stats.active_bytes, pool, size);
          break;
        case block_state::free:
          stats.largest_free_block_bytes = std::max(stats.largest_free_block_bytes, size);
          if (is_split) {
            add_pool(stats.inactive_split, pool, 1);
            add_pool(stats.inactive_split_bytes, pool, size);
          }
          break;
      }
    }
  }
  return stats;
}

std::vector<std::string> compare_current(const device_stats& from_snapshot, const device_stats& live,
                                         bool compare_largest_free) {
  std::vector<std::string> differences;
  const std::vector<stat_value> expected = flatten(from_snapshot);
  const std::vector<stat_value> actual = flatten(live);
  for (std::size_t i = 0; i < expected.size() && i < actual.size(); ++i) {
    const std::string& key = expected[i].key;
    const bool is_current = key.size() > 8 && key.compare(key.size() - 8, 8, ".current") == 0;
    const bool is_largest = key == "largest_free_block_bytes";
    if (!is_current && !(is_largest && compare_largest_free)) continue;
    if (key.rfind("pages_mapped.", 0) == 0) continue;  // not implied by a snapshot
    if (expected[i].integer != actual[i].integer)
      differences.push_back(key + ": snapshot " + std::to_string(expected[i].integer) + ", live " +
                            std::to_string(actual[i].integer));
  }
  return differences;
}

}  // namespace fragless
