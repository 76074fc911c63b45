// The control API on simcuda: memory fraction limits, trim, empty_cache, stats resets,
// and the C ABI's stats and summary.
#include <catch2/catch.hpp>

#include <simcuda/control.h>

#include <memory>
#include <string>
#include <vector>

#include "consistency.hpp"
#include "fragless/fragless.h"
#include "simcuda_support.hpp"

using namespace fragless;
using namespace fragless::testing;

namespace {
constexpr std::size_t kMiB = std::size_t{1} << 20;
}

TEST_CASE("set_memory_fraction caps reserved memory and the OOM message says so", "[control]") {
  reset_simcuda();
  auto instance = make_simcuda_allocator(core::cache_settings{});
  core::device_cache& cache = instance->device(0);
  const double fraction = static_cast<double>(100 * kMiB) / static_cast<double>(cache.capacity_bytes());
  cache.set_memory_fraction(fraction);
  void* first = instance->allocate(60 * kMiB, 0, nullptr);
  try {
    instance->allocate(60 * kMiB, 0, nullptr);
    FAIL("expected out_of_memory_error");
  } catch (const out_of_memory_error& oom) {
    CHECK(std::string(oom.what()).find("reserved-memory limit") != std::string::npos);
  }
  const device_stats stats = cache.stats();
  CHECK(stats.reserved_bytes[pool_all].peak <= static_cast<std::int64_t>(100 * kMiB));
  CHECK(stats.num_ooms == 1);
  check_consistency(cache.snapshot(), stats);
  instance->deallocate(first);
  void* again = instance->allocate(90 * kMiB, 0, nullptr);  // fits once the first is gone
  instance->deallocate(again);
  CHECK_THROWS_AS(cache.set_memory_fraction(0.0), invalid_argument_error);
}

TEST_CASE("trim keeps the asked cached bytes, empty_cache releases the rest", "[control]") {
  for (bool vmm : {true, false}) {
    INFO("vmm " << vmm);
    reset_simcuda();
    const std::uint64_t used_before = simcuda_used_bytes(0);
    auto instance = make_simcuda_allocator(core::cache_settings::for_backend(vmm));
    core::device_cache& cache = instance->device(0);
    std::vector<void*> blocks;
    for (int i = 0; i < 10; ++i) blocks.push_back(instance->allocate(12 * kMiB, 0, nullptr));
    for (void* block : blocks) instance->deallocate(block);
    const std::int64_t cached = cache.stats().reserved_bytes[pool_all].current;
    REQUIRE(cached >= static_cast<std::int64_t>(120 * kMiB));
    const std::size_t released = cache.release_cache(40 * kMiB);
    const std::int64_t kept = cache.stats().reserved_bytes[pool_all].current;
    CHECK(kept <= static_cast<std::int64_t>(60 * kMiB));  // at most the kept bytes plus one segment
    CHECK(static_cast<std::int64_t>(released) == cached - kept);
    check_consistency(cache.snapshot(), cache.stats());
    CHECK(cache.release_cache(0) == static_cast<std::size_t>(kept));
    CHECK(simcuda_used_bytes(0) == used_before);
  }
}

TEST_CASE("reset_peak_stats and reset_accumulated_stats", "[control]") {
  reset_simcuda();
  core::cache_settings settings;
  settings.exact_start_allocations = 0;  // the small request goes to a slab
  auto instance = make_simcuda_allocator(settings);
  core::device_cache& cache = instance->device(0);
  void* big = instance->allocate(30 * kMiB, 0, nullptr);
  void* small = instance->allocate(3000, 0, nullptr);
  instance->deallocate(big);
  device_stats stats = cache.stats();
  CHECK(stats.allocated_bytes[pool_all].peak >= static_cast<std::int64_t>(30 * kMiB));
  cache.reset_peak_stats();
  stats = cache.stats();
  CHECK(stats.allocated_bytes[pool_all].peak == stats.allocated_bytes[pool_all].current);
  CHECK(stats.allocated_bytes[pool_small].peak == 3072);
  cache.reset_accumulated_stats();
  stats = cache.stats();
  CHECK(stats.allocation[pool_all].allocated == 0);
  CHECK(stats.allocation[pool_all].freed == 0);
  CHECK(stats.allocation[pool_all].current == 1);
  CHECK(stats.num_device_alloc == 0);
  instance->deallocate(small);
  CHECK(cache.stats().allocation[pool_all].freed == 1);
}

// Note [Exact start]: exactly placed small blocks are large-pool blocks, slab objects are
// small-pool ones, so the pools' allocation counts tell which path served each request.
namespace {
std::int64_t small_pool_allocations(core::device_cache& cache) {
  return cache.stats(false).allocation[pool_small].allocated;
}
void small_pairs(fragless::core::allocator& instance, int count) {
  for (int i = 0; i < count; ++i) instance.deallocate(instance.allocate(4096 + 512 * (i % 7), 0, nullptr));
}
// A fresh allocator whose unconditional exact start is 100 requests.
std::unique_ptr<core::allocator> exact_start_allocator(std::int64_t small_program_exact_allocations) {
  reset_simcuda();
  core::cache_settings settings;
  settings.exact_start_allocations = 100;
  settings.small_program_exact_allocations = small_program_exact_allocations;
  return make_simcuda_allocator(settings);
}
constexpr std::size_t kLargeProgramBytes = core::cache_settings{}.small_program_reserved_bytes + kMiB;
}  // namespace

TEST_CASE("exact start: a small program stays exact, a large one switches to slabs", "[control][exact_start]") {
  SECTION("a large program still calling the device: exact for the first requests, slabs from then on") {
    auto instance = exact_start_allocator(core::cache_settings{}.small_program_exact_allocations);
    core::device_cache& cache = instance->device(0);
    instance->deallocate(instance->allocate(kLargeProgramBytes, 0, nullptr));
    small_pairs(*instance, 60);
    // Past half of the exact start, a request the cached memory cannot hold: device calls.
    instance->deallocate(instance->allocate(2 * kLargeProgramBytes, 0, nullptr));
    small_pairs(*instance, 40);
    CHECK(small_pool_allocations(cache) == 0);
    small_pairs(*instance, 50);
    CHECK(small_pool_allocations(cache) == 50);
  }
  SECTION("a large program that settled keeps exact placement, calls or not") {
    // Note [Exact start]: no device call in a window of half the exact start past its end --
    // the program repeats within the memory it has -- so switching to slabs would only
    // unsettle it: their pages would be new ones.
    auto instance = exact_start_allocator(core::cache_settings{}.small_program_exact_allocations);
    core::device_cache& cache = instance->device(0);
    instance->deallocate(instance->allocate(kLargeProgramBytes, 0, nullptr));
    small_pairs(*instance, 150);
    CHECK(small_pool_allocations(cache) == 0);
    instance->deallocate(instance->allocate(2 * kLargeProgramBytes, 0, nullptr));  // device calls
    small_pairs(*instance, 100);
    CHECK(small_pool_allocations(cache) == 0);
  }
  SECTION("a small program that grows large before it settles switches at the end of that window") {
    auto instance = exact_start_allocator(core::cache_settings{}.small_program_exact_allocations);
    core::device_cache& cache = instance->device(0);
    small_pairs(*instance, 80);
    void* big = instance->allocate(kLargeProgramBytes, 0, nullptr);  // device calls
    small_pairs(*instance, 20);  // still exact: request 100 ends the window that saw them
    CHECK(small_pool_allocations(cache) == 0);
    small_pairs(*instance, 20);
    CHECK(small_pool_allocations(cache) == 20);
    instance->deallocate(big);
  }
  SECTION("a small program that settled keeps exact placement when it grows large") {
    auto instance = exact_start_allocator(core::cache_settings{}.small_program_exact_allocations);
    core::device_cache& cache = instance->device(0);
    small_pairs(*instance, 300);
    void* big = instance->allocate(kLargeProgramBytes, 0, nullptr);
    small_pairs(*instance, 100);
    CHECK(small_pool_allocations(cache) == 0);
    instance->deallocate(big);
  }
}

TEST_CASE("C ABI: figures and summary of the global allocator", "[control][c_abi]") {
  void* block = fragless_malloc(5 * kMiB, 0, nullptr);
  REQUIRE(block != nullptr);
  fragless_memory_figures figures{};
  REQUIRE(fragless_get_memory_figures(0, &figures) == FRAGLESS_OK);
  CHECK(figures.allocated_bytes >= static_cast<std::int64_t>(5 * kMiB));
  CHECK(figures.reserved_bytes >= figures.allocated_bytes);
  std::size_t needed = 0;
  REQUIRE(fragless_memory_summary(0, nullptr, 0, &needed) == FRAGLESS_OK);
  std::vector<char> text(needed);
  REQUIRE(fragless_memory_summary(0, text.data(), text.size(), nullptr) == FRAGLESS_OK);
  CHECK(std::string(text.data()).find("device ID 0") != std::string::npos);
  fragless_free(block, 5 * kMiB, 0, nullptr);
  std::size_t released = 0;
  REQUIRE(fragless_empty_cache(0, &released) == FRAGLESS_OK);
  CHECK(released >= 5 * kMiB);
  CHECK(fragless_get_memory_figures(0, nullptr) == FRAGLESS_ERROR_INVALID_ARGUMENT);
}

TEST_CASE("snapshot and stats JSON of the global allocator round-trip", "[control][json]") {
  void* large = fragless::allocate(3 * kMiB, 0, nullptr);
  void* small = fragless::allocate(1000, 0, nullptr);
  memory_snapshot parsed;
  std::string error;
  REQUIRE(snapshot_from_json(snapshot_json(0), parsed, error));
  const memory_snapshot direct = snapshot(0);
  CHECK(parsed.segments.size() == direct.segments.size());
  CHECK(check_snapshot(parsed).empty());
  device_stats stats;
  int device = -1;
  REQUIRE(stats_from_json(stats_json(0), stats, device, error));
  CHECK(device == 0);
  CHECK(stats.allocated_bytes[pool_all].current >= static_cast<std::int64_t>(3 * kMiB + 1024));
  CHECK(!snapshot_pickle(0).empty());
  fragless::deallocate(small);
  fragless::deallocate(large);
}

TEST_CASE("cache options on simcuda: dedicated mappings and the release threshold", "[control][options]") {
  for (bool vmm : {true, false}) {
    INFO("vmm " << vmm);
    reset_simcuda();
    const std::uint64_t used_before = simcuda_used_bytes(0);
    core::cache_settings settings = core::cache_settings::for_backend(vmm);
    settings.conf.dedicated_mapping_threshold_bytes = 64 * kMiB;
    settings.conf.release_threshold_bytes = 0;
    auto instance = make_simcuda_allocator(settings);
    core::device_cache& cache = instance->device(0);
    void* stream = create_stream(0);
    void* big = instance->allocate(99 * kMiB, 0, stream);
    fill_pattern(big, 99 * kMiB, 7);
    CHECK(check_pattern(big, 99 * kMiB, 7));
    check_consistency(cache.snapshot(), cache.stats());
    CHECK(simcuda_used_bytes(0) - used_before == 100 * kMiB);  // one page-rounded mapping / segment
    instance->deallocate(big);  // nothing queued on the stream: released at once
    CHECK(simcuda_used_bytes(0) == used_before);
    const device_stats stats = cache.stats();
    CHECK(stats.num_sync_all_streams == 0);
    CHECK(stats.num_device_alloc == stats.num_device_free);
    check_consistency(cache.snapshot(), stats);
    CHECK(race_report().empty());
    destroy_stream(stream);
  }
}
