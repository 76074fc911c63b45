// Loop plans without a device (Note [Loop plans]): a repeating step is found, laid out so
// that no two blocks live at once overlap, followed, and left on the first deviation; steps
// that are not closed, or already make no device call, are not planned; a block the step
// served from a mapping of its own, alone in its place, is left out (Note [Mapped blocks
// in a plan]).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <vector>

#include "core/loop_plan.hpp"
#include "fragless/options.hpp"

using fragless::core::loop_churn;
using fragless::core::loop_plan;
using fragless::core::stream_id;

namespace {

// One step: allocation k has size sizes[k] and is freed after event frees_after[k] of
// the step's allocations (so every block is freed within the step: a closed step).
struct step_shape {
  std::vector<std::size_t> sizes;
  std::vector<std::vector<std::size_t>> frees_after;  // allocation index -> blocks freed after it
  std::vector<stream_id> streams;
};

step_shape random_step(std::uint32_t seed, std::size_t blocks) {
  std::mt19937 random(seed);
  step_shape shape;
  shape.frees_after.resize(blocks);
  for (std::size_t index = 0; index < blocks; ++index) {
    shape.sizes.push_back((1 + random() % 24) * 512 * 1024);
    shape.streams.push_back(reinterpret_cast<stream_id>(static_cast<std::uintptr_t>(1 + random() % 2)));
    const std::size_t free_after = index + random() % (blocks - index);
    shape.frees_after[free_after].push_back(index);
  }
  return shape;
}

// Drives a plan with `steps` repetitions of `shape` and checks, whenever the plan places
// blocks, that no two live planned blocks overlap. Returns the planned allocations seen.
struct drive_result {
  std::size_t planned_allocations = 0;
  std::size_t first_planned_step = SIZE_MAX;
  std::size_t overlaps = 0;
  std::size_t span_bytes = 0;
  bool saw_layout_under_way = false;  // Note [Layout threads]
};

// The pool churns `churn_per_step_bytes` at the start of each of the first
// `moving_steps` steps (with `churn_every_allocation`, at each of their allocations): pages
// moved, or with `churn_is_waits` cross-stream waits (Note [Waits as churn]).
// `hand_over_bytes`: what every plan's hand-over would move; the pool postpones a plan
// whose hand-over is more than it may move yet (Note [Loop plans]).
drive_result drive(loop_plan& plan, const step_shape& shape, std::size_t steps, std::int64_t churn_per_step_bytes = 1,
                   std::size_t moving_steps = SIZE_MAX, std::size_t hand_over_bytes = 0,
                   bool churn_every_allocation = false, bool churn_is_waits = false) {
  drive_result result;
  auto start_if_pending = [&] {
    result.saw_layout_under_way = result.saw_layout_under_way || plan.layout_under_way();
    if (!plan.plan_pending()) return;
    if (hand_over_bytes > plan.hand_over_allowance_bytes()) {
      plan.postpone();
      return;
    }
    result.span_bytes = plan.plan_span_bytes();
    plan.activate();
  };
  std::int64_t churn_bytes = 0;
  std::map<std::size_t, std::size_t> planned_live;  // offset -> size
  for (std::size_t step = 0; step < steps; ++step) {
    std::vector<std::uint64_t> sequences(shape.sizes.size());
    std::vector<std::int64_t> offsets(shape.sizes.size(), -1);
    for (std::size_t index = 0; index < shape.sizes.size(); ++index) {
      const auto offset = plan.planned_offset(shape.sizes[index], shape.streams[index]);
      if (offset) {
        // The planned place must be free now.
        auto after = planned_live.lower_bound(*offset);
        if (after != planned_live.end() && after->first < *offset + shape.sizes[index]) ++result.overlaps;
        if (after != planned_live.begin() && std::prev(after)->first + std::prev(after)->second > *offset)
          ++result.overlaps;
        planned_live[*offset] = shape.sizes[index];
        offsets[index] = static_cast<std::int64_t>(*offset);
        ++result.planned_allocations;
        result.first_planned_step = std::min(result.first_planned_step, step);
      }
      if ((index == 0 || churn_every_allocation) && step < moving_steps) churn_bytes += churn_per_step_bytes;
      const loop_churn churn = churn_is_waits ? loop_churn{0, churn_bytes} : loop_churn{churn_bytes, 0};
      sequences[index] = plan.record_allocation(shape.sizes[index], shape.streams[index], churn);
      start_if_pending();
      for (std::size_t freed : shape.frees_after[index]) {
        if (offsets[freed] >= 0) planned_live.erase(static_cast<std::size_t>(offsets[freed]));
        plan.record_release(sequences[freed], churn);
        start_if_pending();
      }
    }
  }
  return result;
}

std::size_t peak_live_bytes(const step_shape& shape) {
  std::size_t live = 0, peak = 0;
  for (std::size_t index = 0; index < shape.sizes.size(); ++index) {
    live += shape.sizes[index];
    peak = std::max(peak, live);
    for (std::size_t freed : shape.frees_after[index]) live -= shape.sizes[freed];
  }
  return peak;
}

}  // namespace

TEST_CASE("a repeating closed step is planned, followed without overlaps, within its headroom", "[loop_plan]") {
  for (std::uint32_t seed = 1; seed <= 20; ++seed) {
    INFO("seed " << seed);
    const step_shape shape = random_step(seed, 80);
    loop_plan plan(0.10);
    plan.set_enabled(true);
    const drive_result result = drive(plan, shape, 6);
    CHECK(result.overlaps == 0);
    // Seen in step 0; its window recurs at the start of step 1, after a step that moved
    // pages; placing starts at the step's least-live point (its end, here): step 2
    // onwards is planned whole.
    CHECK(result.first_planned_step == 2);
    CHECK(result.planned_allocations >= 3 * shape.sizes.size());
    CHECK(plan.active());
    CHECK(plan.counters().plans_built == 1);
    CHECK(plan.counters().plans_abandoned == 0);
    CHECK(result.span_bytes >= peak_live_bytes(shape));
    CHECK(static_cast<double>(result.span_bytes) <= 1.10 * static_cast<double>(peak_live_bytes(shape)));
  }
}

TEST_CASE("a step whose layout needs more than the headroom is not planned", "[loop_plan]") {
  // Headroom 0: only a layout exactly at the peak is taken. Some seed must fail that (best
  // fit by size is not optimal), and then nothing is placed.
  std::size_t rejected_seeds = 0;
  for (std::uint32_t seed = 1; seed <= 20; ++seed) {
    const step_shape shape = random_step(seed, 80);
    loop_plan plan(0.0);
    plan.set_enabled(true);
    const drive_result result = drive(plan, shape, 4);
    if (plan.counters().plans_built == 0) {
      ++rejected_seeds;
      CHECK(result.planned_allocations == 0);
      CHECK(plan.counters().plans_rejected > 0);
    } else {
      CHECK(result.span_bytes == peak_live_bytes(shape));
    }
  }
  CHECK(rejected_seeds > 0);
}

TEST_CASE("a layout wider than the headroom is followed when the step's churn pays for it", "[loop_plan]") {
  // Headroom 0, churn headroom 100 %: a layout wider than the step's peak is taken only if
  // its excess is no more than what the step moved -- here one page a step, of 1 GiB (more
  // than any excess) or of 512 B (less than any: sizes are multiples of 512 KiB).
  constexpr std::int64_t kGiB = std::int64_t{1} << 30;
  std::size_t wide_seeds = 0;
  for (std::uint32_t seed = 1; seed <= 20; ++seed) {
    INFO("seed " << seed);
    const step_shape shape = random_step(seed, 80);
    loop_plan strict(0.0, 0.0);
    strict.set_enabled(true);
    drive(strict, shape, 4);
    if (strict.counters().plans_built != 0) continue;  // laid out at its peak: not a case
    ++wide_seeds;
    loop_plan paid(0.0, 1.0);
    paid.set_enabled(true);
    const drive_result result = drive(paid, shape, 6, kGiB);
    CHECK(paid.counters().plans_built == 1);
    CHECK(result.overlaps == 0);
    CHECK(result.span_bytes > peak_live_bytes(shape));
    CHECK(result.span_bytes <= 2 * peak_live_bytes(shape));
    loop_plan unpaid(0.0, 1.0);
    unpaid.set_enabled(true);
    CHECK(drive(unpaid, shape, 6, 512).planned_allocations == 0);
    CHECK(unpaid.counters().plans_built == 0);
  }
  CHECK(wide_seeds > 0);
}

TEST_CASE("a step that keeps a block past its end is not planned", "[loop_plan]") {
  step_shape shape = random_step(7, 80);
  // Block 5 is never freed: the step is not closed (a parameter, a growing cache).
  for (auto& freed : shape.frees_after) freed.erase(std::remove(freed.begin(), freed.end(), 5), freed.end());
  loop_plan plan(fragless::options{}.loop_plan_headroom);
  plan.set_enabled(true);
  const drive_result result = drive(plan, shape, 6);
  CHECK(result.planned_allocations == 0);
  CHECK(plan.counters().plans_built == 0);
  CHECK(plan.counters().plans_rejected > 0);
}

TEST_CASE("a loop that moves no page is left as it is", "[loop_plan]") {
  const step_shape shape = random_step(3, 80);
  loop_plan plan(fragless::options{}.loop_plan_headroom);
  plan.set_enabled(true);
  const drive_result result = drive(plan, shape, 6, 0);
  CHECK(result.planned_allocations == 0);
  CHECK(plan.counters().plans_built == 0);
}

TEST_CASE("a loop that only waits across streams is planned, its hand-over paid by no page move", "[loop_plan]") {
  // Note [Waits as churn]: a loop whose pages stay but whose blocks wait for other streams
  // every step is planned as one that moves pages is; the pool sees that no page paid.
  const step_shape shape = random_step(3, 80);
  for (const bool waits : {true, false}) {
    INFO((waits ? "waits" : "page moves"));
    loop_plan plan(0.10);
    plan.set_enabled(true);
    const drive_result result = drive(plan, shape, 6, 1, SIZE_MAX, 0, false, waits);
    CHECK(plan.counters().plans_built == 1);
    CHECK(result.planned_allocations > 0);
    CHECK(result.overlaps == 0);
    CHECK(plan.hand_over_paid_by_moves() == !waits);
  }
}

TEST_CASE("a whole log of waits without a plan does not fail planning, and only a page move records again",
          "[loop_plan]") {
  // Note [Waits as churn]: the move budget is about moves (Note [Move budget]). A log of
  // sizes that never repeat holds no step; every block churns.
  const step_shape step = random_step(3, 80);
  for (const bool waits : {true, false}) {
    INFO((waits ? "waits" : "page moves"));
    loop_plan plan(0.10);
    plan.set_enabled(true);
    std::int64_t churn_bytes = 0;
    for (std::size_t block = 0; block < loop_plan::kMaxLogTokens / 2 + 1; ++block) {
      ++churn_bytes;
      const loop_churn churn = waits ? loop_churn{0, churn_bytes} : loop_churn{churn_bytes, 0};
      plan.record_allocation(512 * (block + 1), nullptr, churn);
      plan.record_release(plan.record_allocation(1, nullptr, churn) - 1, churn);
    }
    CHECK(plan.planning_failed() == !waits);
    // A step that repeats, still churning the same way: recorded and planned after the
    // log of page moves; after the log of waits recording stays paused.
    drive(plan, step, 6, 1, SIZE_MAX, 0, false, waits);
    CHECK(plan.counters().plans_built == (waits ? 0u : 1u));
    if (!waits) continue;
    // One page move starts recording again.
    drive(plan, step, 6, 1, SIZE_MAX, 0, false, false);
    CHECK(plan.counters().plans_built == 1);
  }
}

TEST_CASE("a plan whose hand-over costs more than the loop's churn pays for waits, and the churn pays toward it",
          "[loop_plan]") {
  const step_shape shape = random_step(4, 80);
  // One byte of churn at the start of steps 0 .. moving_steps - 1; the window recurs at the
  // start of step 1, so step 1 must move pages for a plan to be built at all. Its first
  // start (step 2) may move what the step it was built from churned and
  // kHandOverPaybackSteps steps more at that rate; each step it waits adds its own churn.
  const std::size_t at_once_bytes = 1 + loop_plan::kHandOverPaybackSteps;
  struct expectation {
    std::size_t moving_steps;
    std::size_t hand_over_bytes;
    std::size_t first_planned_step;  // SIZE_MAX: never placed
  };
  for (const expectation& expected : {
           expectation{2, 0, 2},                       // cheap: at once
           expectation{2, at_once_bytes, 2},           // paid by the build step's churn and its rate
           expectation{2, at_once_bytes + 1, SIZE_MAX},  // waits; step 2 moves nothing: dropped
           expectation{3, at_once_bytes + 1, 3},       // waits; step 2 churns a byte more: starts
           expectation{3, at_once_bytes + 2, SIZE_MAX},  // still short after step 2; step 3 moves nothing
           expectation{1, 0, SIZE_MAX},                // step 1 moved nothing: never built
       }) {
    INFO("steps that move pages: " << expected.moving_steps << ", hand-over bytes: " << expected.hand_over_bytes);
    loop_plan plan(0.10);
    plan.set_enabled(true);
    const drive_result result = drive(plan, shape, 6, 1, expected.moving_steps, expected.hand_over_bytes);
    CHECK(result.first_planned_step == expected.first_planned_step);
    CHECK(result.overlaps == 0);
    CHECK(plan.active() == (expected.first_planned_step != SIZE_MAX));
    CHECK(plan.counters().plans_built == (expected.first_planned_step != SIZE_MAX ? 1u : 0u));
    // A loop that settled by itself is not a failure of planning.
    CHECK_FALSE(plan.planning_failed());
  }
}

TEST_CASE("a deviation abandons the plan, planning has not failed, and only a longer step is planned after it",
          "[loop_plan]") {
  const step_shape shape = random_step(11, 80);
  loop_plan plan(0.10);
  plan.set_enabled(true);
  drive(plan, shape, 4);
  REQUIRE(plan.active());
  // Another size where the plan expects its first allocation.
  plan.record_allocation(123 * 512, nullptr, loop_churn{1000});
  CHECK_FALSE(plan.active());
  CHECK(plan.counters().plans_abandoned == 1);
  // The loop it planned ended; that is no failure of planning (Note [Move budget]).
  CHECK_FALSE(plan.planning_failed());
  // The same step again is not planned (it was as long as the abandoned plan).
  const drive_result again = drive(plan, shape, 6);
  CHECK(again.planned_allocations == 0);
  CHECK(plan.counters().plans_built == 1);
  // A step twice as long (the same shape twice, with other sizes) is.
  step_shape longer = random_step(12, 160);
  loop_plan fresh(0.10);
  fresh.set_enabled(true);
  CHECK(drive(fresh, longer, 5).planned_allocations > 0);
  const drive_result longer_result = drive(plan, longer, 6);
  CHECK(longer_result.planned_allocations > 0);
  CHECK(longer_result.overlaps == 0);
}

// A step that repeats a shorter pattern inside it (micro-batches, layers): allocation 0
// lives through the step; then `repeats` copies of a 20-block chain (each block freed
// after the next is made), each copy's first block freed early in the next copy, at a
// place that varies from copy to copy. Windows inside the chain recur at the copy's
// length, so that length is found first and rejected (a block outlives it, or the steps
// do not line up); the step's own length recurs only a whole step later.
step_shape step_with_inner_repeats(std::size_t repeats) {
  constexpr std::size_t kChain = 20;
  step_shape shape;
  auto add = [&](std::size_t size_bytes) {
    shape.sizes.push_back(size_bytes);
    shape.streams.push_back(nullptr);
    shape.frees_after.emplace_back();
    return shape.sizes.size() - 1;
  };
  const std::size_t whole = add(std::size_t{64} << 20);
  std::size_t carried = SIZE_MAX;  // the previous copy's first block
  for (std::size_t copy = 0; copy < repeats; ++copy) {
    std::size_t first = SIZE_MAX, previous = SIZE_MAX;
    for (std::size_t link = 0; link < kChain; ++link) {
      const std::size_t made = add((link + 1) * 512 * 1024);
      if (link == 0) {
        first = made;  // carried into the next copy
        continue;
      }
      if (previous != SIZE_MAX) shape.frees_after[made].push_back(previous);
      if (link == 1 + copy % 3 && carried != SIZE_MAX) shape.frees_after[made].push_back(carried);
      previous = made;
    }
    shape.frees_after.back().push_back(previous);
    carried = first;
  }
  shape.frees_after.back().push_back(carried);
  shape.frees_after.back().push_back(whole);
  return shape;
}

TEST_CASE("a repeat inside the step found first does not hold the step back a whole step", "[loop_plan]") {
  const step_shape shape = step_with_inner_repeats(12);
  loop_plan plan(0.10);
  plan.set_enabled(true);
  // Pages move all through the step, so the inner repeats' lengths are built (and
  // rejected, or planned and abandoned where the copies end). Three steps: the step's
  // windows recur from the start of step 1; built there, it places in step 2, as a step
  // without inner repeats does.
  const drive_result result = drive(plan, shape, 3, 1, SIZE_MAX, 0, /*churn_every_allocation=*/true);
  CHECK(result.overlaps == 0);
  CHECK(plan.counters().plans_rejected > 0);  // the inner lengths were tried
  CHECK(plan.active());
  CHECK(plan.plan_span_bytes() >= peak_live_bytes(shape));  // the whole step's plan, not a copy's
}

TEST_CASE("disabled, nothing is recorded or planned", "[loop_plan]") {
  const step_shape shape = random_step(5, 80);
  loop_plan plan(fragless::options{}.loop_plan_headroom);
  const drive_result result = drive(plan, shape, 6);
  CHECK(result.planned_allocations == 0);
  CHECK(plan.counters().plans_built == 0);
  CHECK(plan.counters().plans_rejected == 0);
}

namespace {

// Two enabled plans of the same headrooms, one laying large steps out on threads, one on
// the allocating thread (Note [Layout threads]).
struct both_ways {
  loop_plan threaded;
  loop_plan at_once;
  both_ways(double headroom, double churn_headroom)
      : threaded(headroom, churn_headroom, true), at_once(headroom, churn_headroom, false) {
    threaded.set_enabled(true);
    at_once.set_enabled(true);
  }
};

}  // namespace

// Note [Layout threads]: a step of kLayoutThreadBlocks blocks or more is laid out on threads
// while the loop goes on; the plan must start at the same event with the same layout as
// one laid out at once.
TEST_CASE("a large step laid out on threads starts the plan a layout at once would", "[loop_plan]") {
  const std::size_t blocks = loop_plan::kLayoutThreadBlocks + 100;
  for (std::uint32_t seed = 1; seed <= 4; ++seed) {
    INFO("seed " << seed);
    const step_shape shape = random_step(seed, blocks);
    both_ways plans(0.10, 0.10);
    loop_plan& threaded = plans.threaded;
    loop_plan& at_once = plans.at_once;
    const drive_result with_threads = drive(threaded, shape, 5);
    const drive_result without = drive(at_once, shape, 5);
    CHECK(with_threads.saw_layout_under_way);
    CHECK_FALSE(without.saw_layout_under_way);
    CHECK(with_threads.overlaps == 0);
    CHECK(with_threads.first_planned_step == without.first_planned_step);
    CHECK(with_threads.span_bytes == without.span_bytes);
    CHECK(with_threads.planned_allocations == without.planned_allocations);
    CHECK(threaded.counters().plans_built == at_once.counters().plans_built);
    CHECK(threaded.counters().plans_rejected == at_once.counters().plans_rejected);
    CHECK(threaded.active() == at_once.active());
  }
}

TEST_CASE("a large step's layout too wide is refused where placing would start", "[loop_plan]") {
  // Headroom 0: a layout at the step's peak or nothing. Whether laid out on threads or at
  // once, nothing is placed, the plan counts as failed, and the step is not laid out again.
  // (Seed 22: a step whose layout stays above its peak, as in the next case.)
  const step_shape shape = random_step(22, loop_plan::kLayoutThreadBlocks + 100);
  both_ways plans(0.0, 0.0);
  loop_plan& threaded = plans.threaded;
  loop_plan& at_once = plans.at_once;
  const drive_result with_threads = drive(threaded, shape, 6);
  const drive_result without = drive(at_once, shape, 6);
  REQUIRE(at_once.counters().plans_built == 0);  // the case needs a layout wider than the peak
  CHECK(with_threads.saw_layout_under_way);
  CHECK(with_threads.planned_allocations == 0);
  CHECK(threaded.counters().plans_built == 0);
  CHECK(threaded.counters().plans_rejected >= 1);
  // Recorded while laid out, the log goes on: the step is not found and laid out again.
  CHECK(threaded.counters().plans_rejected == at_once.counters().plans_rejected);
  CHECK(threaded.planning_failed());
  CHECK_FALSE(threaded.active());
  CHECK_FALSE(threaded.layout_under_way());
  CHECK(without.planned_allocations == 0);
}

TEST_CASE("a loop refused as too wide is budgeted while it keeps to its step, and not after", "[loop_plan]") {
  // Note [Move budget]: headroom 0 refuses a layout wider than the peak; the loop is then
  // followed without placing. Planning counts as failed while the program keeps to the
  // step, no longer once it leaves it (another loop that moves no page), and again when
  // it comes back; nothing is ever placed. At once and on threads alike. (Seed 22: steps
  // whose layouts stay above their peak; seed 21's 80-block step reaches its peak since
  // Note [Skyline layout].)
  for (std::size_t blocks : {std::size_t{80}, loop_plan::kLayoutThreadBlocks + 100}) {
    INFO("blocks " << blocks);
    const step_shape refused = random_step(22, blocks);
    const step_shape other = random_step(5, 40);
    both_ways plans(0.0, 0.0);
    for (loop_plan* plan : {&plans.at_once, &plans.threaded}) {
      const drive_result first = drive(*plan, refused, 5);
      REQUIRE(plan->counters().plans_built == 0);  // the case needs a layout wider than the peak
      CHECK(plan->counters().plans_rejected >= 1);
      CHECK(first.planned_allocations == 0);
      CHECK(plan->planning_failed());
      CHECK_FALSE(plan->active());
      drive(*plan, other, 3, 0);  // no page moves: never a candidate
      CHECK_FALSE(plan->planning_failed());
      const drive_result again = drive(*plan, refused, 4);
      CHECK(again.planned_allocations == 0);
      CHECK(plan->planning_failed());
      CHECK(plan->counters().plans_built == 0);
    }
  }
}

TEST_CASE("a deviation, or the plan's end, while a large step is laid out stops the layout", "[loop_plan]") {
  const step_shape shape = random_step(5, loop_plan::kLayoutThreadBlocks + 100);
  // Two steps and a few events: the step has been found, its layout is under way.
  auto drive_until_under_way = [&](loop_plan& plan) {
    std::vector<std::uint64_t> sequences(shape.sizes.size());
    for (std::size_t step = 0; step < 2 && !plan.layout_under_way(); ++step)
      for (std::size_t index = 0; index < shape.sizes.size() && !plan.layout_under_way(); ++index) {
        sequences[index] = plan.record_allocation(shape.sizes[index], shape.streams[index], loop_churn{static_cast<std::int64_t>(1 + step)});
        for (std::size_t freed : shape.frees_after[index]) plan.record_release(sequences[freed], loop_churn{static_cast<std::int64_t>(1 + step)});
      }
  };
  loop_plan deviated(0.10, 0.10, true);
  deviated.set_enabled(true);
  drive_until_under_way(deviated);
  REQUIRE(deviated.layout_under_way());
  CHECK_FALSE(deviated.active());  // nothing placed before the layout is taken
  deviated.record_allocation(123 * 512, nullptr, loop_churn{1000});  // a size the step never asks for
  CHECK_FALSE(deviated.layout_under_way());
  CHECK_FALSE(deviated.active());
  CHECK(deviated.counters().plans_built == 0);
  // Destroyed, or turned off, with a layout under way: its threads are stopped and joined.
  {
    loop_plan dropped(0.10, 0.10, true);
    dropped.set_enabled(true);
    drive_until_under_way(dropped);
    CHECK(dropped.layout_under_way());
  }
  loop_plan turned_off(0.10, 0.10, true);
  turned_off.set_enabled(true);
  drive_until_under_way(turned_off);
  REQUIRE(turned_off.layout_under_way());
  turned_off.set_enabled(false);
  CHECK_FALSE(turned_off.layout_under_way());
  CHECK_FALSE(turned_off.active());
}

// Note [Mapped blocks in a plan]: weights the step served from mappings of their own, live
// all step, share their place in the layout with no block; a huge block freed early shares
// its place with the blocks made after it. The first is left out of the plan -- expected in
// its turn, not placed, the span narrower by its size -- and the second stays in it.
TEST_CASE("a block served by a mapping of its own and alone in its place is left out of the plan", "[loop_plan]") {
  constexpr std::size_t gib = std::size_t{1} << 30;
  const auto stream = reinterpret_cast<stream_id>(std::uintptr_t{1});
  // 0: weights (3 GiB, a mapping), freed last; 1: a 2 GiB block (a mapping), freed at once;
  // 2-5: 1 GiB each, freed last but one; 6-45: small blocks, each freed after the next.
  std::vector<std::size_t> sizes = {3 * gib, 2 * gib, gib, gib, gib, gib};
  for (std::size_t index = 0; index < 40; ++index) sizes.push_back((1 + index % 7) * 512 * 1024);
  std::vector<std::vector<std::size_t>> frees_after(sizes.size());
  frees_after[1] = {1};
  for (std::size_t index = 6; index + 1 < sizes.size(); ++index) frees_after[index + 1].push_back(index);
  frees_after.back().insert(frees_after.back().end(), {sizes.size() - 1, 2, 3, 4, 5, 0});
  loop_plan plan(0.10);
  plan.set_enabled(true);
  std::int64_t churn_bytes = 0;
  std::optional<std::size_t> weights_offset, early_offset;
  bool placed = false;
  for (std::size_t step = 0; step < 5; ++step) {
    std::vector<std::uint64_t> sequences(sizes.size());
    for (std::size_t index = 0; index < sizes.size(); ++index) {
      if (plan.active() && index == 0) {
        placed = true;
        weights_offset = plan.planned_offset(sizes[0], stream);
        CHECK_FALSE(plan.deviates(sizes[0], stream));
      }
      if (plan.active() && index == 1) early_offset = plan.planned_offset(sizes[1], stream);
      churn_bytes += index == 2 ? 1 : 0;
      sequences[index] = plan.record_allocation(sizes[index], stream, loop_churn{churn_bytes}, index <= 1);
      for (std::size_t freed : frees_after[index]) {
        plan.record_release(sequences[freed], loop_churn{churn_bytes});
        if (plan.plan_pending()) plan.activate();
      }
      if (plan.plan_pending()) plan.activate();
    }
  }
  REQUIRE(placed);
  CHECK(plan.counters().plans_abandoned == 0);
  CHECK_FALSE(weights_offset.has_value());
  CHECK(early_offset.has_value());
  std::size_t small_peak_bytes = 0;
  for (std::size_t index = 6; index + 1 < sizes.size(); ++index)
    small_peak_bytes = std::max(small_peak_bytes, sizes[index] + sizes[index + 1]);
  // The four 1 GiB blocks and the small ones at their peak: the weights' 3 GiB are not in it.
  CHECK(plan.plan_span_bytes() <= 4 * gib + small_peak_bytes);
}

