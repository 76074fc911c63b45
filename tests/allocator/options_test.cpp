// The cache options of the core, driven by the fake backend: release_threshold_bytes,
// garbage_collection_threshold, max_split_bytes (with the oversize stats),
// dedicated_mapping_threshold_bytes and the cudaMalloc-mode segment sizes. Each case runs the same steps with the option off and
// on and asserts on device memory (fake backend counters) and stats, so it fails when the
// option has no effect. No timing: "a stream may still touch it" is the fake's
// events_complete switch.
#include <catch2/catch.hpp>

#include <string>

#include "fake_random_operations.hpp"

using namespace fragless;
using fragless::testing::fake_backend;
using fragless::testing::stream_number;

namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

using fixture = fragless::testing::fake_fixture;

// The table's defaults, except no automatic compaction (compact_threshold_bytes defaults to
// 256 MiB): each case isolates the option it tests from that other way of releasing cache.
core::cache_settings mode(bool vmm) {
  core::cache_settings settings = core::cache_settings::for_backend(vmm);
  settings.conf.compact_threshold_bytes = unlimited_bytes;
  return settings;
}

}  // namespace

TEST_CASE("release_threshold_bytes: idle cached memory above it goes at the next slow path", "[options]") {
  const bool vmm = GENERATE(true, false);
  const bool enabled = GENERATE(false, true);
  INFO("vmm " << vmm << ", threshold " << (enabled ? "0" : "unlimited"));
  core::cache_settings settings = mode(vmm);
  if (enabled) settings.conf.release_threshold_bytes = 0;
  fixture f(kGiB, settings);
  void* keep = f.instance.allocate(1 * kMiB, 0, stream_number(1));
  const std::uint64_t base_bytes = f.device_backend->used_bytes();
  void* block = f.instance.allocate(40 * kMiB, 0, stream_number(1));
  REQUIRE(f.device_backend->used_bytes() == base_bytes + 40 * kMiB);

  // Stream 1 may still touch the freed block: it stays cached whatever the threshold.
  f.device_backend->events_complete = false;
  f.instance.deallocate(block);
  CHECK(f.device_backend->used_bytes() == base_bytes + 40 * kMiB);
  f.check();

  // Now stream 1 is idle: the next slow-path point (a large allocation) releases it.
  f.device_backend->events_complete = true;
  void* next = f.instance.allocate(2 * kMiB, 0, stream_number(1));
  f.check();
  f.instance.deallocate(next);
  f.check();
  if (enabled)
    CHECK(f.device_backend->used_bytes() == base_bytes);
  else
    CHECK(f.device_backend->used_bytes() >= base_bytes + 40 * kMiB);
  const device_stats stats = f.cache().stats();
  CHECK(stats.num_sync_all_streams == 0);  // never by a device synchronization
  CHECK(f.device_backend->syncs == 0);
  f.instance.deallocate(keep);
}

TEST_CASE("release_threshold_bytes: the cache keeps up to the threshold (VMM pages)", "[options]") {
  core::cache_settings settings = mode(true);
  settings.conf.release_threshold_bytes = 10 * kMiB;
  settings.conf.physical_chunk_first_growth_bytes = 0;  // pages released one by one, not a 20 MiB chunk
  fixture f(kGiB, settings);
  void* block = f.instance.allocate(40 * kMiB, 0, stream_number(1));
  f.instance.deallocate(block);  // a large free is a slow-path point
  CHECK(f.device_backend->mapped_bytes() == 10 * kMiB);
  CHECK(f.cache().stats().reserved_bytes[pool_all].current == static_cast<std::int64_t>(10 * kMiB));
  f.check();
}

TEST_CASE("garbage_collection_threshold: cached segments go before growing above it", "[options]") {
  const bool enabled = GENERATE(false, true);
  const bool streams_idle = GENERATE(true, false);
  INFO("gc " << enabled << ", idle " << streams_idle);
  core::cache_settings settings = mode(false);
  if (enabled) settings.conf.garbage_collection_threshold = 0.5;
  fixture f(kGiB, settings);
  void* a = f.instance.allocate(300 * kMiB, 0, stream_number(1));
  void* b = f.instance.allocate(300 * kMiB, 0, stream_number(1));
  f.device_backend->events_complete = streams_idle;
  f.instance.deallocate(a);  // 600 MiB reserved, 300 MiB of it a cached free segment
  f.device_backend->events_complete = true;
  if (!streams_idle) f.device_backend->events_complete = false;
  void* c = f.instance.allocate(400 * kMiB, 0, stream_number(1));  // fits no cached segment
  f.check();
  if (enabled && streams_idle)
    CHECK(f.device_backend->used_bytes() == 700 * kMiB);  // a's segment released first
  else
    CHECK(f.device_backend->used_bytes() == 1000 * kMiB);  // kept (off, or a stream may touch it)
  CHECK(f.device_backend->syncs == 0);
  f.device_backend->events_complete = true;
  f.instance.deallocate(b);
  f.instance.deallocate(c);
  f.check();
}

TEST_CASE("garbage_collection_threshold: below the threshold nothing is collected", "[options]") {
  core::cache_settings settings = mode(false);
  settings.conf.garbage_collection_threshold = 0.9;
  fixture f(kGiB, settings);
  void* a = f.instance.allocate(300 * kMiB, 0, stream_number(1));
  void* b = f.instance.allocate(300 * kMiB, 0, stream_number(1));
  f.instance.deallocate(a);
  void* c = f.instance.allocate(400 * kMiB, 0, stream_number(1));
  CHECK(f.device_backend->used_bytes() == 1000 * kMiB);
  f.instance.deallocate(b);
  f.instance.deallocate(c);
  f.check();
}

TEST_CASE("max_split_bytes: oversize cached segments are not split; oversize stats", "[options]") {
  const bool enabled = GENERATE(false, true);
  INFO("max_split " << enabled);
  core::cache_settings settings = mode(false);
  if (enabled) settings.conf.max_split_bytes = 40 * kMiB;
  fixture f(kGiB, settings);
  void* a = f.instance.allocate(100 * kMiB, 0, stream_number(1));
  f.instance.deallocate(a);
  REQUIRE(f.device_backend->used_bytes() == 100 * kMiB);

  void* small_one = f.instance.allocate(8 * kMiB, 0, stream_number(1));
  f.check();
  if (enabled) {
    CHECK(small_one != a);  // a new 20 MiB segment, not a piece of the oversize one
    CHECK(f.device_backend->used_bytes() == 120 * kMiB);
  } else {
    CHECK(small_one == a);  // carved from the cached 100 MiB segment
    CHECK(f.device_backend->used_bytes() == 100 * kMiB);
  }

  void* big = f.instance.allocate(90 * kMiB, 0, stream_number(1));
  f.check();
  device_stats stats = f.cache().stats();
  if (enabled) {
    CHECK(big == a);  // within the slack: takes the whole range...
    CHECK(stats.allocated_bytes[pool_large].current == static_cast<std::int64_t>(108 * kMiB));  // ...100 + 8
    CHECK(stats.max_split_size == static_cast<std::int64_t>(40 * kMiB));
    CHECK(stats.oversize_allocations.current == 1);
    CHECK(stats.oversize_segments.current == 1);
  } else {
    CHECK(stats.max_split_size == -1);
    CHECK(stats.oversize_allocations.current == 0);
    CHECK(stats.oversize_segments.current == 0);
  }
  f.instance.deallocate(big);
  stats = f.cache().stats();
  CHECK(stats.oversize_allocations.current == 0);
  CHECK(stats.oversize_allocations.allocated == (enabled ? 2 : 0));  // a and big
  f.instance.deallocate(small_one);
  f.check();
}

TEST_CASE("max_split_bytes: an oversize request does not take a much larger cached segment", "[options]") {
  core::cache_settings settings = mode(false);
  settings.conf.max_split_bytes = 40 * kMiB;
  fixture f(kGiB, settings);
  void* a = f.instance.allocate(200 * kMiB, 0, stream_number(1));
  f.instance.deallocate(a);
  void* b = f.instance.allocate(60 * kMiB, 0, stream_number(1));  // 140 MiB over: >= a large segment
  CHECK(b != a);
  CHECK(f.device_backend->used_bytes() == 260 * kMiB);
  f.check();
  f.instance.deallocate(b);
  f.check();
}

TEST_CASE("max_split_bytes in VMM mode: the oversize stats follow the threshold", "[options]") {
  core::cache_settings settings = mode(true);
  settings.conf.max_split_bytes = 40 * kMiB;
  fixture f(kGiB, settings);
  void* a = f.instance.allocate(50 * kMiB, 0, stream_number(1));
  void* b = f.instance.allocate(10 * kMiB, 0, stream_number(1));
  f.check();
  const device_stats stats = f.cache().stats();
  CHECK(stats.oversize_allocations.current == 1);
  CHECK(stats.oversize_segments.current == 1);  // one mapped run of 60 MiB
  CHECK(stats.max_split_size == static_cast<std::int64_t>(40 * kMiB));
  f.instance.deallocate(a);
  f.instance.deallocate(b);
  CHECK(f.cache().stats().oversize_allocations.current == 0);
  f.check();
}

TEST_CASE("small_segment_bytes / large_segment_bytes size cudaMalloc segments", "[options]") {
  const bool custom = GENERATE(false, true);
  INFO("custom sizes " << custom);
  core::cache_settings settings = mode(false);
  if (custom) {
    settings.conf.small_segment_bytes = 4 * kMiB;
    settings.conf.large_segment_bytes = 40 * kMiB;
  }
  fixture f(kGiB, settings);
  void* slab_object = f.instance.allocate(1000, 0, stream_number(1));
  CHECK(f.device_backend->used_bytes() == (custom ? 4 : 2) * kMiB);
  void* medium = f.instance.allocate(5 * kMiB, 0, stream_number(1));
  CHECK(f.device_backend->used_bytes() == (custom ? 4 + 40 : 2 + 20) * kMiB);
  void* large = f.instance.allocate(46 * kMiB, 0, stream_number(1));  // its own size
  CHECK(f.device_backend->used_bytes() == (custom ? 4 + 40 + 46 : 2 + 20 + 46) * kMiB);
  f.check();
  for (void* block : {slab_object, medium, large}) f.instance.deallocate(block);
  f.check();
}

TEST_CASE("dedicated_mapping_threshold_bytes: a very large request gets a mapping of its own", "[options]") {
  const bool enabled = GENERATE(false, true);
  INFO("dedicated " << enabled);
  core::cache_settings settings = mode(true);
  if (enabled) settings.conf.dedicated_mapping_threshold_bytes = 64 * kMiB;
  fixture f(kGiB, settings);
  void* small_block = f.instance.allocate(1 * kMiB, 0, stream_number(1));  // in the shared range
  const std::int64_t maps_before = f.cache().stats().num_map;
  const std::uint64_t used_before = f.device_backend->used_bytes();
  void* big = f.instance.allocate(99 * kMiB, 0, stream_number(1));
  REQUIRE(f.device_backend->is_mapped(reinterpret_cast<std::uintptr_t>(big), 99 * kMiB));
  f.check();
  device_stats stats = f.cache().stats();
  if (enabled) {
    CHECK(stats.num_map - maps_before == 1);  // one mapping, not one per page
    CHECK(f.device_backend->used_bytes() - used_before == 100 * kMiB);  // rounded to the page
    CHECK(stats.allocated_bytes[pool_large].current == static_cast<std::int64_t>(101 * kMiB));
    // Its own segment in the snapshot, holding just this block.
    bool found = false;
    for (const snapshot_segment& segment : f.cache().snapshot().segments)
      if (segment.address == reinterpret_cast<std::uintptr_t>(big)) {
        found = true;
        CHECK(segment.size_bytes == 100 * kMiB);
        CHECK(segment.blocks.size() == 1);
      }
    CHECK(found);
  } else {
    // In the shared range: its run of pages in chunks (Note [Physical chunks]), not one
    // mapping of its own.
    CHECK(stats.num_map - maps_before > 1);
  }

  // Freed: cached, and reused in place by a request of the same rounded size.
  f.instance.deallocate(big);
  f.check();
  CHECK(f.device_backend->used_bytes() >= used_before + 98 * kMiB);
  const std::int64_t maps_cached = f.cache().stats().num_map;
  void* again = f.instance.allocate(100 * kMiB, 0, stream_number(1));
  CHECK(again == big);
  if (enabled) CHECK(f.cache().stats().num_map == maps_cached);  // the same mapping
  f.instance.deallocate(again);
  f.cache().release_cache(0);
  f.check();
  CHECK(f.device_backend->used_bytes() == used_before);
  f.instance.deallocate(small_block);
  stats = f.cache().stats();
  CHECK(stats.num_device_alloc - stats.num_device_free == 1);  // the small block's page
}

TEST_CASE("dedicated mappings follow the release threshold and stream safety", "[options]") {
  core::cache_settings settings = mode(true);
  settings.conf.dedicated_mapping_threshold_bytes = 64 * kMiB;
  settings.conf.release_threshold_bytes = 0;
  fixture f(kGiB, settings);
  void* big = f.instance.allocate(128 * kMiB, 0, stream_number(1));
  REQUIRE(f.device_backend->used_bytes() == 128 * kMiB);
  f.device_backend->events_complete = false;  // stream 1 may still touch it
  f.instance.deallocate(big);
  CHECK(f.device_backend->used_bytes() == 128 * kMiB);
  f.check();
  // Another stream reusing it waits for stream 1 first.
  const int waits_before = f.device_backend->waits;
  void* other = f.instance.allocate(128 * kMiB, 0, stream_number(2));
  CHECK(other == big);
  CHECK(f.device_backend->waits == waits_before + 1);
  f.instance.deallocate(other);
  f.device_backend->events_complete = true;
  void* next = f.instance.allocate(4 * kMiB, 0, stream_number(1));  // a slow-path point
  CHECK(f.device_backend->used_bytes() == 4 * kMiB);
  CHECK(f.device_backend->syncs == 0);
  f.instance.deallocate(next);
  f.check();
}

TEST_CASE("all options on: random operations keep stats and layout consistent", "[options][property]") {
  const bool vmm = GENERATE(true, false);
  INFO("vmm " << vmm);
  core::cache_settings settings = mode(vmm);
  settings.conf.release_threshold_bytes = 64 * kMiB;
  settings.conf.garbage_collection_threshold = 0.6;
  settings.conf.max_split_bytes = 24 * kMiB;
  settings.conf.small_segment_bytes = 4 * kMiB;
  settings.conf.large_segment_bytes = 32 * kMiB;
  settings.conf.dedicated_mapping_threshold_bytes = 40 * kMiB;
  fixture f(2 * kGiB, settings);
  fragless::testing::random_operation_mix mix;
  mix.seed = vmm ? 3 : 4;
  mix.operations = fragless::testing::test_operations(8000);
  mix.live_limit_bytes = kGiB;
  mix.largest_mib = 60;
  fragless::testing::run_random_operations(f, vmm, mix);
  CHECK(f.cache().stats().oversize_allocations.current == 0);
  CHECK(f.device_backend->used_bytes() == 0);
}

TEST_CASE("FRAGLESS_CONF options reach the core under their table names, with the table's defaults", "[options]") {
  // Defaults: the table's (vmm backend, no max split size).
  core::cache_settings defaults;
  defaults.conf = parse_options("");
  CHECK(defaults.conf == options{});
  fixture plain(kGiB, defaults);
  CHECK(std::string(plain.cache().backend_name()) == "vmm");
  CHECK(plain.cache().stats().max_split_size == -1);
  // Set: the parsed value is the value the cache reads.
  core::cache_settings set;
  set.conf = parse_options("backend:cudaMalloc,max_split_bytes:64MiB,large_segment_bytes:40MiB");
  CHECK_FALSE(set.wants_vmm());
  fixture configured(kGiB, set);
  CHECK(std::string(configured.cache().backend_name()) == "cudaMalloc");
  CHECK(configured.cache().stats().max_split_size == static_cast<std::int64_t>(64 * kMiB));
  void* block = configured.instance.allocate(12 * kMiB, 0, stream_number(1));
  CHECK(configured.device_backend->used_bytes() == 40 * kMiB);  // one large segment
  configured.instance.deallocate(block);
}

TEST_CASE("dedicated mappings: a failing device call leaves nothing behind", "[options][faults]") {
  const char* call = GENERATE("reserve_address_range", "create_physical", "map");
  INFO("failing " << call);
  core::cache_settings settings = mode(true);
  settings.conf.dedicated_mapping_threshold_bytes = 64 * kMiB;
  fixture f(kGiB, settings);
  f.cache();  // the shared range is reserved before the failure is armed
  f.device_backend->fail_next = call;
  CHECK_THROWS_AS(f.instance.allocate(100 * kMiB, 0, stream_number(1)), device_error);
  CHECK(f.device_backend->used_bytes() == 0);
  CHECK(f.device_backend->mapped_bytes() == 0);
  f.check();
  void* block = f.instance.allocate(100 * kMiB, 0, stream_number(1));  // works once the call does
  CHECK(f.device_backend->used_bytes() == 100 * kMiB);
  f.instance.deallocate(block);
  f.cache().release_cache(0);
  CHECK(f.device_backend->used_bytes() == 0);
  const device_stats stats = f.cache().stats();
  CHECK(stats.num_device_alloc == stats.num_device_free);
  f.check();
}
