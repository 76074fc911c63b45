// ideal: the floor no allocator can beat on a trace, and the live-bytes curve.
// Invariant: ideal_bytes = round_up(max over time of sum(round_up(live size, 512 B)), 2 MiB):
// every allocator hands out at least 512 B-aligned blocks and the device maps memory in
// 2 MiB granules (see the README's "Metrics").
#pragma once

#include "traces/trace.hpp"

#include <cstdint>
#include <vector>

namespace fragless::bench {

inline constexpr std::uint64_t block_rounding_bytes = 512;
inline constexpr std::uint64_t page_granule_bytes = std::uint64_t{2} << 20;

constexpr std::uint64_t round_up(std::uint64_t value, std::uint64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

struct ideal_summary {
  std::uint64_t peak_live_bytes = 0;          // requested bytes
  std::uint64_t peak_live_rounded_bytes = 0;  // each block rounded up to 512 B
  std::uint64_t ideal_bytes = 0;              // peak_live_rounded_bytes rounded up to 2 MiB
  std::size_t peak_event = 0;                 // event index where the rounded peak is reached
};

// Over the first `event_limit` events (all when 0).
ideal_summary compute_ideal(const traces::trace& t, std::size_t event_limit = 0);

}  // namespace fragless::bench
