// Helpers shared by the stats publisher's tests (publisher_tests.cpp,
// stats_page_listing_tests.cpp): stats whose every field is known, the warnings a
// publisher reported, and a publisher that has published such stats.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>
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

// A publisher (warnings to collect()) that has published known_stats(base) for device 0.
inline std::unique_ptr<stats_publisher> publishing_known_stats(std::int64_t base) {
  auto publisher = stats_publisher::create(collect());
  REQUIRE(publisher != nullptr);
  publisher->publish(0, known_stats(base));
  return publisher;
}

}  // namespace fragless::testing
