// Helpers shared by the stats publisher's tests (publisher_tests.cpp,
// stats_page_listing_tests.cpp): stats whose every field is known, and the warnings a
// publisher reported.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fragless/stats_publisher.hpp"
#include "runtime_directory.hpp"

namespace fragless::testing {

// Every field of the stats a distinct number, counting up from `base`.
inline device_stats known_stats(std::int64_t base) {
  device_stats stats{};
  std::int64_t next = base;
  for (const stat_value& v : flatten(stats)) set_flat_value(stats, v.key, next++);
  return stats;
}

// The warnings of the publisher made with collect(), cleared by each collect().
inline std::vector<std::string> warnings;
inline stats_publisher::warning_callback collect() {
  warnings.clear();
  return [](std::string_view message) { warnings.emplace_back(message); };
}

}  // namespace fragless::testing
