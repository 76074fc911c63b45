// When reserved memory may grow (Note [Growth], Note [Move budget] in
// allocator/core/vmm_pool_growth.cpp), as properties over random seeds on simcuda:
//  - huge blocks whose sizes change every step never push reserved memory past the peak of
//    the live blocks' page-rounded bytes (idle cached mappings are given back first), and
//    their data survives; a huge request that free pages of the shared range can hold
//    takes them rather than a new mapping, below the high-water mark too;
//  - loops whose huge and ordinary blocks take turns settle at zero device calls per step
//    (no mapping given back and re-created every step; short steps are planned);
//  - a loop that keeps moving pages settles at zero device calls per step with the move
//    budget, never moves more pages than it created, and its reserved memory stays within
//    the pages it touches over a step; without the budget some seeds keep moving.
// The race oracle stays at zero throughout.
#include <catch2/catch.hpp>

#include <simcuda/control.h>

#include <algorithm>
#include <random>
#include <vector>

#include "consistency.hpp"
#include "simcuda_support.hpp"

using namespace fragless;
using namespace fragless::testing;

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kPage = 2 * kMiB;

std::size_t round_to_page(std::size_t bytes) { return (bytes + kPage - 1) / kPage * kPage; }

std::int64_t device_calls(core::device_cache& cache) { return fragless::testing::device_calls(cache.stats()); }

struct block {
  void* address;
  std::size_t size_bytes;
  std::uint64_t seed;
};

}  // namespace

TEST_CASE("huge blocks of varying size: reserved never passes the peak of live mappings", "[growth]") {
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    INFO("seed " << seed);
    reset_simcuda();
    core::cache_settings settings;
    settings.conf.dedicated_mapping_threshold_bytes = 8 * kMiB;  // every block below is dedicated
    auto instance = make_simcuda_allocator(settings);
    core::device_cache& cache = instance->device(0);
    std::mt19937_64 random(seed);
    std::size_t live_bytes = 0;
    std::size_t live_high_water_bytes = 0;
    std::vector<block> live;
    auto free_one = [&](std::size_t index) {
      const block b = live[index];
      CHECK(check_pattern(b.address, b.size_bytes, b.seed));
      instance->deallocate(b.address);
      live_bytes -= round_to_page(b.size_bytes);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(index));
    };
    std::uint64_t pattern = seed * 1000;
    for (int step = 0; step < 8; ++step) {
      const int blocks = 2 + static_cast<int>(random() % 5);
      for (int i = 0; i < blocks; ++i) {
        const std::size_t bytes = 8 * kMiB + random() % (56 * kMiB);  // a new size every time
        void* address = instance->allocate(bytes, 0, nullptr);
        REQUIRE(address != nullptr);
        fill_pattern(address, bytes, ++pattern);
        live.push_back({address, bytes, pattern});
        live_bytes += round_to_page(bytes);
        live_high_water_bytes = std::max(live_high_water_bytes, live_bytes);
        if (live.size() > 1 && random() % 3 == 0) free_one(random() % (live.size() - 1));  // freed early
      }
      while (!live.empty()) free_one(live.size() - 1);
    }
    const device_stats stats = cache.stats();
    check_consistency(cache.snapshot(), stats);
    INFO("peak reserved " << stats.reserved_bytes[pool_all].peak << " peak live " << live_high_water_bytes);
    CHECK(stats.reserved_bytes[pool_all].peak <= static_cast<std::int64_t>(live_high_water_bytes));
    INFO(race_report());
    CHECK(simcuda_race_count() == 0);
  }
}

namespace {

struct churn_outcome {
  std::int64_t last_step_calls = 0;
  std::int64_t page_moves = 0;
  std::int64_t pages_created = 0;
  std::int64_t peak_reserved_bytes = 0;
  std::size_t touched_over_step_bytes = 0;
};

// One seed's loop: a fixed step of 6-14 blocks of 1-12 MiB, each freed at a random later
// point of the step, repeated `steps` times. Pure moving past the pages touched at once
// (page_move_headroom 0) and no loop plans: only the budget can stop the churn.
churn_outcome run_churning_loop(std::uint64_t seed, bool budget, int steps) {
  reset_simcuda();
  core::cache_settings settings;
  settings.conf.page_move_headroom = 0.0;
  settings.conf.loop_plans = false;
  settings.conf.page_move_budget = budget;
  settings.exact_start_allocations = 0;
  // One page per created chunk (reserved memory stays far below 512 MiB), so that the
  // chunks created count the pages created (Note [First growth] would make 20 MiB ones).
  settings.conf.physical_chunk_first_growth_bytes = 0;
  auto instance = make_simcuda_allocator(settings);
  core::device_cache& cache = instance->device(0);
  std::mt19937_64 random(seed);
  struct event {
    bool allocate;
    std::size_t index;
  };
  std::vector<std::size_t> sizes(6 + random() % 9);
  for (std::size_t& size : sizes) size = kMiB + (random() % (11 * kMiB)) / 512 * 512;
  // Allocations in order; block i is freed after allocation i + 1 + (random) more.
  std::vector<event> order;
  std::vector<std::vector<std::size_t>> frees_after(sizes.size() + 1);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const std::size_t after = std::min(sizes.size(), i + 1 + random() % 4);
    frees_after[after].push_back(i);
  }
  for (std::size_t i = 0; i <= sizes.size(); ++i) {
    if (i < sizes.size()) order.push_back({true, i});
    for (std::size_t victim : frees_after[i]) order.push_back({false, victim});
  }
  churn_outcome outcome;
  std::vector<void*> addresses(sizes.size());
  std::vector<std::uintptr_t> touched;
  for (int step = 0; step < steps; ++step) {
    const std::int64_t before = device_calls(cache);
    for (const event& e : order) {
      if (e.allocate) {
        addresses[e.index] = instance->allocate(sizes[e.index], 0, nullptr);
        REQUIRE(addresses[e.index] != nullptr);
        fill_pattern(addresses[e.index], sizes[e.index], seed * 100 + e.index);
        if (step == steps - 1) {
          const auto address = reinterpret_cast<std::uintptr_t>(addresses[e.index]);
          for (std::uintptr_t page = address / kPage; page <= (address + sizes[e.index] - 1) / kPage; ++page)
            touched.push_back(page);
        }
      } else {
        CHECK(check_pattern(addresses[e.index], sizes[e.index], seed * 100 + e.index));
        instance->deallocate(addresses[e.index]);
      }
    }
    outcome.last_step_calls = device_calls(cache) - before;
  }
  std::sort(touched.begin(), touched.end());
  outcome.touched_over_step_bytes =
      static_cast<std::size_t>(std::unique(touched.begin(), touched.end()) - touched.begin()) * kPage;
  const device_stats stats = cache.stats();
  check_consistency(cache.snapshot(), stats);
  outcome.page_moves = stats.num_page_moves;
  outcome.pages_created = stats.num_device_alloc;
  outcome.peak_reserved_bytes = stats.reserved_bytes[pool_all].peak;
  INFO(race_report());
  CHECK(simcuda_race_count() == 0);
  return outcome;
}

}  // namespace

TEST_CASE("move budget: a churning loop settles at zero device calls, moves never exceed creations",
          "[growth]") {
  constexpr int kSteps = 16;
  int churning_without_budget = 0;
  for (std::uint64_t seed = 1; seed <= 24; ++seed) {
    INFO("seed " << seed);
    const churn_outcome with_budget = run_churning_loop(seed, true, kSteps);
    CHECK(with_budget.last_step_calls == 0);
    // Each move is paid for by a page created before it.
    CHECK(with_budget.page_moves <= with_budget.pages_created);
    // Settled: no more than the pages the step touches over time, plus the pages the
    // steps before touched at once where they differ (bounded by one step's pages).
    CHECK(with_budget.peak_reserved_bytes <= static_cast<std::int64_t>(2 * with_budget.touched_over_step_bytes));
    const churn_outcome without_budget = run_churning_loop(seed, false, kSteps);
    if (without_budget.last_step_calls > 0) ++churning_without_budget;
  }
  // The property is not vacuous: without the budget some of these loops move pages every step.
  CHECK(churning_without_budget > 0);
}

TEST_CASE("a huge request takes the shared range's free pages before a mapping of its own", "[growth]") {
  // 40 MiB of ordinary blocks, freed: their pages stay mapped as free pages. A huge request
  // of each size below fits in them, and must take them: no device call, reserved memory
  // unchanged. Without another huge block the request would set a new peak with a mapping
  // of its own (it would leave the free pages idle at that peak). With a 64 MiB huge block
  // P live beside the ordinary ones and freed too, the mark is high enough for a mapping
  // below it, and P's cached mapping fits no request exactly: giving P back to map the
  // request left both kinds of memory taking turns in loops, one released and re-created
  // every step.
  for (bool other_huge : {false, true}) {
    for (std::size_t huge_bytes : {10 * kMiB, 24 * kMiB, 38 * kMiB}) {
      INFO("huge " << huge_bytes << (other_huge ? " after another huge block" : ""));
      reset_simcuda();
      core::cache_settings settings;
      settings.conf.dedicated_mapping_threshold_bytes = 8 * kMiB;
      auto instance = make_simcuda_allocator(settings);
      core::device_cache& cache = instance->device(0);
      std::vector<void*> blocks;
      for (int i = 0; i < 10; ++i) blocks.push_back(instance->allocate(4 * kMiB, 0, nullptr));
      if (other_huge) blocks.push_back(instance->allocate(64 * kMiB, 0, nullptr));
      for (void* b : blocks) {
        REQUIRE(b != nullptr);
        instance->deallocate(b);
      }
      const std::int64_t reserved_before = cache.stats().reserved_bytes[pool_all].current;
      const std::int64_t peak_before = cache.stats().reserved_bytes[pool_all].peak;
      const std::int64_t calls_before = device_calls(cache);
      void* huge = instance->allocate(huge_bytes, 0, nullptr);
      REQUIRE(huge != nullptr);
      fill_pattern(huge, huge_bytes, 77);
      const device_stats stats = cache.stats();
      CHECK(device_calls(cache) == calls_before);
      CHECK(stats.reserved_bytes[pool_all].current == reserved_before);
      CHECK(stats.reserved_bytes[pool_all].peak == peak_before);
      CHECK(check_pattern(huge, huge_bytes, 77));
      check_consistency(cache.snapshot(), stats);
      instance->deallocate(huge);
      INFO(race_report());
      CHECK(simcuda_race_count() == 0);
    }
  }
}

TEST_CASE("loops mixing huge and ordinary blocks settle at zero device calls per step", "[growth]") {
  // A fixed step of 6-14 blocks of 1-48 MiB (those of 8 MiB and more are huge), each freed
  // at a random later point of the step, repeated: once every size has been seen, the
  // cached pages and mappings must serve every step without a device call, and reserved
  // memory must stay within the pages and mappings the step's blocks hold at once, twice
  // over (a bound loose enough for any placement, tight enough to catch keeping both).
  constexpr int kSteps = 12;
  for (std::uint64_t seed = 1; seed <= 24; ++seed) {
    INFO("seed " << seed);
    reset_simcuda();
    core::cache_settings settings;
    settings.conf.dedicated_mapping_threshold_bytes = 8 * kMiB;
    settings.exact_start_allocations = 0;
    auto instance = make_simcuda_allocator(settings);
    core::device_cache& cache = instance->device(0);
    std::mt19937_64 random(seed);
    std::vector<std::size_t> sizes(6 + random() % 9);
    for (std::size_t& size : sizes) size = kMiB + (random() % (47 * kMiB)) / 512 * 512;
    std::vector<std::vector<std::size_t>> frees_after(sizes.size() + 1);
    for (std::size_t i = 0; i < sizes.size(); ++i)
      frees_after[std::min(sizes.size(), i + 1 + random() % 4)].push_back(i);
    std::vector<void*> addresses(sizes.size());
    std::size_t live_bytes = 0;
    std::size_t live_high_water_bytes = 0;
    std::int64_t last_step_calls = 0;
    for (int step = 0; step < kSteps; ++step) {
      const std::int64_t before = device_calls(cache);
      for (std::size_t i = 0; i <= sizes.size(); ++i) {
        if (i < sizes.size()) {
          addresses[i] = instance->allocate(sizes[i], 0, nullptr);
          REQUIRE(addresses[i] != nullptr);
          fill_pattern(addresses[i], sizes[i], seed * 100 + i);
          live_bytes += round_to_page(sizes[i]) + kPage;  // a block may touch one page more
          live_high_water_bytes = std::max(live_high_water_bytes, live_bytes);
        }
        for (std::size_t victim : frees_after[i]) {
          CHECK(check_pattern(addresses[victim], sizes[victim], seed * 100 + victim));
          instance->deallocate(addresses[victim]);
          live_bytes -= round_to_page(sizes[victim]) + kPage;
        }
      }
      last_step_calls = device_calls(cache) - before;
    }
    const device_stats stats = cache.stats();
    check_consistency(cache.snapshot(), stats);
    CHECK(last_step_calls == 0);
    CHECK(stats.reserved_bytes[pool_all].peak <= static_cast<std::int64_t>(2 * live_high_water_bytes));
    INFO(race_report());
    CHECK(simcuda_race_count() == 0);
  }
}
