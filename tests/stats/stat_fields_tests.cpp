// The field list and its generic views: update helpers keep the invariants, flatten()
// covers every stored int64 exactly once, resets do what PyTorch's do.
#include <catch2/catch.hpp>

#include <random>
#include <set>

#include "fragless/stats.hpp"

using namespace fragless;

TEST_CASE("update keeps current == allocated - freed, peak >= current, all == small + large") {
  pool_stat s{};
  std::mt19937_64 random(7);
  std::int64_t small_live = 0, large_live = 0, peak_all = 0;
  for (int i = 0; i < 10000; ++i) {
    const pool_kind pool = random() % 2 ? pool_small : pool_large;
    std::int64_t& live = pool == pool_small ? small_live : large_live;
    std::int64_t delta = static_cast<std::int64_t>(random() % 1000) - (live > 0 ? 500 : 0);
    if (live + delta < 0) delta = -live;
    update(s, pool, delta);
    live += delta;
    peak_all = std::max(peak_all, small_live + large_live);
    REQUIRE(s[pool_small].current == small_live);
    REQUIRE(s[pool_large].current == large_live);
  }
  for (const stat& one : s) {
    CHECK(one.current == one.allocated - one.freed);
    CHECK(one.peak >= one.current);
  }
  CHECK(s[pool_all].current == s[pool_small].current + s[pool_large].current);
  CHECK(s[pool_all].allocated == s[pool_small].allocated + s[pool_large].allocated);
  CHECK(s[pool_all].peak == peak_all);
}

TEST_CASE("flatten has the PyTorch memory_stats keys, each once, and set_flat_value reaches every stored one") {
  device_stats stats{};
  const std::vector<stat_value> values = flatten(stats);
  std::set<std::string> keys;
  for (const stat_value& v : values) CHECK(keys.insert(v.key).second);
  for (const char* group : {"allocation", "segment", "active", "inactive_split", "allocated_bytes", "reserved_bytes",
                            "active_bytes", "inactive_split_bytes", "requested_bytes"})
    for (const char* pool : {"all", "small_pool", "large_pool"})
      for (const char* part : {"current", "peak", "allocated", "freed"})
        CHECK(keys.count(std::string(group) + "." + pool + "." + part) == 1);
  for (const char* key : {"oversize_allocations.current", "oversize_segments.freed", "num_alloc_retries", "num_ooms",
                          "num_sync_all_streams", "num_device_alloc", "num_device_free", "max_split_size"})
    CHECK(keys.count(key) == 1);

  // Give every stored value a distinct number through its key, then read them all back.
  std::int64_t next = 1;
  for (const stat_value& v : values) {
    const bool derived = v.key == "unused_reserved_bytes" || v.key == "fragmentation";
    CHECK(set_flat_value(stats, v.key, derived ? 0 : next++) != derived);
  }
  std::int64_t expected = 1;
  for (const stat_value& v : flatten(stats)) {
    if (v.key == "unused_reserved_bytes" || v.key == "fragmentation") continue;
    CHECK(v.integer == expected++);
  }
  CHECK(sizeof(device_stats) == static_cast<std::size_t>(expected - 1) * sizeof(std::int64_t));
  CHECK_FALSE(set_flat_value(stats, "allocation.all", 1));
  CHECK_FALSE(set_flat_value(stats, "allocation.everything.current", 1));
  CHECK_FALSE(flat_value(stats, "nope").has_value());
}

TEST_CASE("reset_peak and reset_accumulated") {
  device_stats stats{};
  update(stats.allocated_bytes, pool_small, 1000);
  update(stats.allocated_bytes, pool_small, -600);
  stats.num_ooms = 3;
  stats.num_map = 5;
  stats.max_split_size = 123;
  stats.reset_peak();
  CHECK(stats.allocated_bytes[pool_all].peak == 400);
  CHECK(stats.allocated_bytes[pool_small].peak == 400);
  stats.reset_accumulated();
  CHECK(stats.allocated_bytes[pool_all].allocated == 0);
  CHECK(stats.allocated_bytes[pool_all].freed == 0);
  CHECK(stats.allocated_bytes[pool_all].current == 400);
  CHECK(stats.num_ooms == 0);
  CHECK(stats.num_map == 0);
  CHECK(stats.max_split_size == 123);  // a gauge, not accumulated
}

TEST_CASE("derived figures") {
  device_stats stats{};
  CHECK(stat_fragmentation(stats) == 0.0);
  update(stats.reserved_bytes, pool_large, 100 << 20);
  update(stats.allocated_bytes, pool_large, 60 << 20);
  stats.largest_free_block_bytes = 10 << 20;
  CHECK(stat_unused_reserved_bytes(stats) == double(40 << 20));
  CHECK(stat_fragmentation(stats) == Approx(0.75));
  CHECK(*flat_value(stats, "fragmentation") == Approx(0.75));
  stats.largest_free_block_bytes = 40 << 20;
  CHECK(stat_fragmentation(stats) == 0.0);
}

TEST_CASE("the field table names every field once with a description") {
  std::set<std::string_view> names;
  for (const stat_field& field : stat_fields()) {
    CHECK(names.insert(field.name).second);
    CHECK_FALSE(field.description.empty());
  }
  CHECK(names.count("allocated_bytes") == 1);
  CHECK(names.count("fragmentation") == 1);
}
