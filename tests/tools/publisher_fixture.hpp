// What tests/tools/publisher_fixture publishes, shared with the tests that check the CLI
// reports exactly these numbers.
#pragma once

#include "fragless/stats.hpp"
#include "fragless/stats_snapshot.hpp"

namespace fragless::fixture {

inline constexpr int devices[] = {0, 2};

// Distinct, known values for every stored field; device-dependent.
inline device_stats known_stats(int device) {
  device_stats stats{};
  std::int64_t next = 1000 * (device + 1);
  for (const stat_value& v : flatten(stats)) set_flat_value(stats, v.key, next += 4097);
  return stats;
}

inline memory_snapshot known_snapshot() {
  memory_snapshot s;
  s.device_count = 3;
  s.max_split_size = -1;
  s.settings = "backend:vmm";
  const std::uint64_t a = 0x7f0000000000, mib = 1 << 20;
  s.segments.push_back({0, a, 2 * mib, 0, pool_small, false,
                        {{a, mib, 1000, block_state::allocated}, {a + mib, mib, 0, block_state::free}}});
  s.segments.push_back({0, a + 64 * mib, 20 * mib, 5, pool_large, false,
                        {{a + 64 * mib, 8 * mib, 8 * mib, block_state::allocated},
                         {a + 72 * mib, 4 * mib, 0, block_state::pending_free},
                         {a + 76 * mib, 8 * mib, 0, block_state::free}}});
  s.segments.push_back({2, a + 1024 * mib, 40 * mib, 0, pool_large, true,
                        {{a + 1024 * mib, 40 * mib, 39 * mib, block_state::allocated}}});
  return s;
}

}  // namespace fragless::fixture
