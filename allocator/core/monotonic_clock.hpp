// The allocator's one clock: steady (monotonic) nanoseconds, for the map/unmap timers of
// the stats and the compaction interval. Invariant: never goes backwards.
#pragma once

#include <chrono>
#include <cstdint>

namespace fragless::core {

inline std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace fragless::core
