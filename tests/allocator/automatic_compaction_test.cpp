// Automatic compaction on simcuda (Note [Compaction]): a pass at a slow-path point takes
// only pages that stayed free since the previous pass (compaction_age_passes passes), and
// the background thread returns free pages with no allocator call.
// Invariant checked: a pass never takes a page freed since the previous one, and every pass
// leaves the stats and the snapshot consistent.
#include <catch2/catch.hpp>

#include <simcuda/control.h>

#include <chrono>
#include <thread>
#include <vector>

#include "consistency.hpp"
#include "simcuda_support.hpp"

using namespace fragless;
using namespace fragless::testing;

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

}  // namespace

TEST_CASE("automatic compaction takes only pages free since the previous pass", "[compaction]") {
  reset_simcuda();
  core::cache_settings settings;
  settings.conf.compact_threshold_bytes = 4 * kMiB;
  settings.compaction_interval_ns = 0;  // a pass at every slow-path point: epochs are deterministic
  settings.compaction_age_passes = 1;
  auto instance = make_simcuda_allocator(settings);
  core::device_cache& cache = instance->device(0);
  std::vector<void*> blocks;
  for (int i = 0; i < 10; ++i) blocks.push_back(instance->allocate(4 * kMiB, 0, nullptr));
  // Each free is a slow-path point, so a pass runs after it once more than the threshold is
  // cached (from the second free on). A pass takes only pages free since before the
  // previous pass: the first pass takes nothing, and from the third free on every pass
  // takes the blocks freed before the previous pass but never the one just freed.
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    INFO("block " << i);
    instance->deallocate(blocks[i]);
    CHECK(simcuda_is_accessible(blocks[i], 4 * kMiB));
    if (i >= 2) CHECK_FALSE(simcuda_is_accessible(blocks[i - 1], 4 * kMiB));
    const std::size_t live_blocks = blocks.size() - i - 1;
    const std::size_t cached_blocks = i < 2 ? i + 1 : 1;
    CHECK(cache.stats().reserved_bytes[pool_all].current ==
          static_cast<std::int64_t>(4 * kMiB * (live_blocks + cached_blocks)));
  }
  CHECK(cache.stats().num_compactions == 9);
  CHECK(cache.stats().compaction_released_bytes == static_cast<std::int64_t>(9 * 4 * kMiB));
  check_consistency(cache.snapshot(), cache.stats());

  // Without a pass in between (a long interval), a loop that reuses the same blocks makes
  // no map or unmap call after its first iteration.
  core::cache_settings steady = settings;
  steady.compaction_interval_ns = std::int64_t{3600} * 1'000'000'000;
  auto loop_instance = make_simcuda_allocator(steady);
  core::device_cache& loop_cache = loop_instance->device(0);
  std::int64_t maps_after_warmup = 0;
  std::int64_t unmaps_after_warmup = 0;
  for (int iteration = 0; iteration < 10; ++iteration) {
    std::vector<void*> step;
    for (std::size_t bytes : {5 * kMiB, 300 * std::size_t{1024}, 9 * kMiB, 700 * std::size_t{1024}, 3 * kMiB})
      step.push_back(loop_instance->allocate(bytes, 0, nullptr));
    for (void* block : step) loop_instance->deallocate(block);
    if (iteration == 1) {
      maps_after_warmup = loop_cache.stats().num_map;
      unmaps_after_warmup = loop_cache.stats().num_unmap;
    }
  }
  CHECK(loop_cache.stats().num_map == maps_after_warmup);
  CHECK(loop_cache.stats().num_unmap == unmaps_after_warmup);
}

TEST_CASE("automatic compaction takes a page only after it stayed free through compaction_age_passes passes",
          "[compaction]") {
  // A is freed, then every allocation and free of C is a slow-path point with a pass
  // (interval 0). C does not fit A's hole and pages are not moved, so A's pages stay
  // untouched: they must survive the passes that find them younger than the age and go at
  // the first that finds them old enough.
  for (std::uint32_t age : {1u, 3u, 10u}) {
    INFO("age " << age);
    reset_simcuda();
    core::cache_settings settings;
    settings.conf.compact_threshold_bytes = 0;
    settings.compaction_interval_ns = 0;
    settings.compaction_age_passes = age;
    settings.conf.page_moves = false;  // C gets new pages; A's pages leave only by compaction
    auto instance = make_simcuda_allocator(settings);
    core::device_cache& cache = instance->device(0);
    void* a = instance->allocate(4 * kMiB, 0, nullptr);
    void* b = instance->allocate(4 * kMiB, 0, nullptr);
    const std::int64_t passes_before = cache.stats().num_compactions;
    instance->deallocate(a);  // pass 1 finds A at age 0
    std::int64_t passes_while_mapped = 0;
    // Both the allocation and the free of C are slow-path points with a pass.
    auto note_passes = [&] {
      if (simcuda_is_accessible(a, 4 * kMiB)) passes_while_mapped = cache.stats().num_compactions - passes_before;
    };
    note_passes();
    for (int step = 0; step < 20 && simcuda_is_accessible(a, 4 * kMiB); ++step) {
      void* c = instance->allocate(6 * kMiB, 0, nullptr);
      note_passes();
      instance->deallocate(c);
      note_passes();
    }
    // Pass k sees A at age k - 1: the passes that left it mapped are exactly 1..age.
    CHECK_FALSE(simcuda_is_accessible(a, 4 * kMiB));
    CHECK(passes_while_mapped == static_cast<std::int64_t>(age));
    CHECK(simcuda_is_accessible(b, 4 * kMiB));
    check_consistency(cache.snapshot(), cache.stats());
    instance->deallocate(b);
  }
}

TEST_CASE("background compaction returns free pages with no allocator call", "[compaction]") {
  reset_simcuda();
  core::cache_settings settings;
  settings.conf.compact_threshold_bytes = 4 * kMiB;
  settings.compaction_interval_ns = 2'000'000;  // 2 ms
  settings.conf.background_compaction = true;
  auto instance = make_simcuda_allocator(settings);
  core::device_cache& cache = instance->device(0);
  std::vector<void*> blocks;
  for (int i = 0; i < 20; ++i) blocks.push_back(instance->allocate(4 * kMiB, 0, nullptr));
  for (void* block : blocks) instance->deallocate(block);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::int64_t reserved = cache.stats().reserved_bytes[pool_all].current;
  while (reserved > static_cast<std::int64_t>(4 * kMiB) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    reserved = cache.stats().reserved_bytes[pool_all].current;
  }
  CHECK(reserved <= static_cast<std::int64_t>(4 * kMiB));
  CHECK(cache.stats().num_compactions >= 2);
  check_consistency(cache.snapshot(), cache.stats());
}
