// Loop plans on simcuda (Note [Loop plans]): a two-stream loop whose step touches more
// pages than its peak settles at zero device calls with a plan (and keeps moving pages
// without one), every block's data survives, the race oracle stays at zero, a plan's
// range lies over the loop's own pages even below a block kept across steps or an empty
// slab, a planned block waits only for the streams that freed its bytes, a planned step of
// four streams reuses its places within each stream more than its plain layout did, a loop
// that moves no page but waits across streams is planned without a new peak, and a
// deviation leaves the plan without losing memory or consistency.
#include <catch2/catch.hpp>

#include <simcuda/control.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "consistency.hpp"
#include "core/vmm_pool.hpp"
#include "simcuda_support.hpp"

using namespace fragless;
using namespace fragless::testing;

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kPage = 2 * kMiB;
constexpr int kStreams = 4;

struct step_shape {
  std::vector<std::size_t> sizes;
  std::vector<int> streams;                           // 0 .. kStreams - 1
  std::vector<std::vector<std::size_t>> frees_after;  // blocks freed after allocation k
};

// Twelve rounds of: A and B, free A, C (too large for A's hole), free B and C -- the
// three-block loop of the compaction tests, whose blocks touch 10 pages over a round but 7
// at once. Rounds alternate between two streams, and each has its own scale (6/6/8 MiB
// shrinking by 3/3/4 x 64 KiB a round), so the step has no shorter period.
// Best fit puts C past B each time, so without a plan pages move every step (the 2 %
// headroom allows no eighth page); laid out as a whole, the step fits in 7 pages.
step_shape three_block_rounds() {
  step_shape shape;
  for (int round = 0; round < 12; ++round) {
    const std::size_t scale = 2 * kMiB - static_cast<std::size_t>(round) * 64 * 1024;
    const int stream = (round / 2) % 2;
    const std::size_t a = shape.sizes.size();
    shape.sizes.insert(shape.sizes.end(), {3 * scale, 3 * scale, 4 * scale});
    shape.streams.insert(shape.streams.end(), {stream, stream, stream});
    shape.frees_after.push_back({});
    shape.frees_after.push_back({a});          // after B: free A
    shape.frees_after.push_back({a + 1, a + 2});  // after C: free B and C
  }
  return shape;
}

// three_block_rounds() inside a step that also holds `steady_blocks` blocks of 4 MiB from
// its start to its end: pages reused in place every step, which a plan's range must hold
// too.
step_shape rounds_among_steady_blocks(std::size_t steady_blocks) {
  const step_shape rounds = three_block_rounds();
  step_shape shape;
  for (std::size_t block = 0; block < steady_blocks; ++block) {
    shape.sizes.push_back(4 * kMiB);
    shape.streams.push_back(0);
    shape.frees_after.push_back({});
  }
  for (std::size_t index = 0; index < rounds.sizes.size(); ++index) {
    shape.sizes.push_back(rounds.sizes[index]);
    shape.streams.push_back(rounds.streams[index]);
    shape.frees_after.push_back({});
    for (std::size_t freed : rounds.frees_after[index]) shape.frees_after.back().push_back(freed + steady_blocks);
  }
  for (std::size_t block = 0; block < steady_blocks; ++block) shape.frees_after.back().push_back(block);
  return shape;
}

// rounds_among_steady_blocks() with every round on stream 1: the steady blocks (stream 0)
// and the rounds' blocks never share a place, so in a step that follows a plan no block
// needs to wait for the other stream.
step_shape steady_blocks_beside_one_stream_rounds(std::size_t steady_blocks) {
  step_shape shape = rounds_among_steady_blocks(steady_blocks);
  for (std::size_t index = steady_blocks; index < shape.streams.size(); ++index) shape.streams[index] = 1;
  return shape;
}

// A step of 96 blocks on four streams taking turns at random, each block living for a
// drawn number of the step's allocations (the shape of corpus many-streams, small): sizes
// 1-8 MiB in 256 KiB units; what is live at the step's end is freed there.
step_shape interleaved_streams(std::uint32_t seed) {
  std::mt19937 random(seed);
  step_shape shape;
  std::vector<std::pair<std::size_t, std::size_t>> pending;  // (due, block)
  constexpr std::size_t kBlocks = 96;
  for (std::size_t index = 0; index < kBlocks; ++index) {
    shape.sizes.push_back((4 + random() % 29) * 256 * 1024);
    shape.streams.push_back(static_cast<int>(random() % kStreams));
    shape.frees_after.push_back({});
    pending.emplace_back(index + 1 + random() % 12, index);
    for (std::size_t at = 0; at < pending.size();) {
      if (pending[at].first <= index || index + 1 == kBlocks) {
        shape.frees_after.back().push_back(pending[at].second);
        pending[at] = pending.back();
        pending.pop_back();
      } else {
        ++at;
      }
    }
  }
  return shape;
}

struct loop_result {
  std::vector<std::int64_t> calls_per_step;
  std::vector<std::int64_t> reuses_across_streams_per_step;  // blocks ordered after another stream
  std::int64_t peak_reserved_bytes = 0;
  device_stats stats;
  bool patterns_intact = true;
};

// Runs `steps` steps of `shape`; in step `deviate_at` block 10 is 512 KiB larger. Every
// block is written on its stream by a kernel and carries a pattern checked when it is freed.
// `fence_bytes` > 0: before the loop, a block of `fence_block_bytes` is placed
// `fence_bytes` into the range and kept to the end, so the loop's pages lie mostly below
// it. A small block is freed at once instead: its slab stays, empty, as the small pool's
// cache of its class.
loop_result run_loop(const core::cache_settings& loop_settings, const step_shape& shape, int steps,
                     int deviate_at = -1, std::size_t fence_bytes = 0, std::size_t fence_block_bytes = kMiB) {
  reset_simcuda();
  // The first step's pages in chunks of the fractions' size, not Note [First growth]'s
  // 20 MiB: these loops' blocks share pages, and the moves a plan settles are per page.
  core::cache_settings settings = loop_settings;
  settings.conf.physical_chunk_first_growth_bytes = 0;
  auto instance = make_simcuda_allocator(settings);
  core::device_cache& cache = instance->device(0);
  void* streams[kStreams];
  for (void*& stream : streams) stream = create_stream();
  void* fence = nullptr;
  if (fence_bytes > 0) {
    void* below = instance->allocate(fence_bytes, 0, streams[0]);
    fence = instance->allocate(fence_block_bytes, 0, streams[0]);
    instance->deallocate(below);
    if (fence_block_bytes <= core::kSmallLimitBytes) {
      instance->deallocate(fence);
      fence = nullptr;
    }
  }
  loop_result result;
  for (int step = 0; step < steps; ++step) {
    const device_stats at_start = cache.stats();
    const std::int64_t before = device_calls(at_start);
    std::vector<void*> blocks(shape.sizes.size());
    std::vector<std::size_t> sizes = shape.sizes;
    if (step == deviate_at) sizes[10] += 512 * 1024;
    for (std::size_t index = 0; index < sizes.size(); ++index) {
      void* stream = streams[shape.streams[index]];
      blocks[index] = instance->allocate(sizes[index], 0, stream);
      const std::uint64_t seed = static_cast<std::uint64_t>(step) * 1000 + index;
      fill_pattern(blocks[index], sizes[index], seed);
      simcuda_launch(static_cast<simcuda_stream>(stream), blocks[index], sizes[index], 1);
      // Kernels finish before a block is freed (so its pages are idle and may move),
      // except in the step's last round: those are still pending when the next step, on
      // the other stream, reuses the memory (the race oracle watches that ordering).
      if (index + 3 < sizes.size()) simcuda_complete_all();
      for (std::size_t freed : shape.frees_after[index]) {
        if (!check_pattern(blocks[freed], sizes[freed], static_cast<std::uint64_t>(step) * 1000 + freed))
          result.patterns_intact = false;
        instance->deallocate(blocks[freed]);
      }
    }
    const device_stats at_end = cache.stats();
    result.calls_per_step.push_back(device_calls(at_end) - before);
    result.reuses_across_streams_per_step.push_back(at_end.num_cross_stream_waits + at_end.num_standing_waits -
                                                    at_start.num_cross_stream_waits - at_start.num_standing_waits);
  }
  simcuda_complete_all();
  result.stats = cache.stats();
  result.peak_reserved_bytes = result.stats.reserved_bytes[pool_all].peak;
  check_consistency(cache.snapshot(), result.stats);
  if (fence != nullptr) instance->deallocate(fence);  // after the stats: not part of the step
  cache.compact();
  const device_stats after = cache.stats();
  CHECK(after.reserved_bytes[pool_all].current <= static_cast<std::int64_t>(core::kCachedPagesKept * kPage));
  for (void* stream : streams) destroy_stream(stream);
  return result;
}

// One plan, followed to the end; the step that hands over to it costs no more than an
// unplanned step, and then the loop makes no call; data intact, no race.
void check_cheap_hand_over(const loop_result& planned) {
  std::string calls;
  for (std::int64_t step_calls : planned.calls_per_step) calls += std::to_string(step_calls) + " ";
  INFO("calls per step: " << calls << "; page moves " << planned.stats.num_page_moves);
  CHECK(planned.patterns_intact);
  CHECK(planned.stats.num_loop_plans == 1);
  CHECK(planned.stats.num_loop_plans_abandoned == 0);
  REQUIRE(planned.calls_per_step[1] > 0);  // the loop moves pages every step before its plan
  for (std::size_t step = 2; step < planned.calls_per_step.size(); ++step)
    CHECK(planned.calls_per_step[step] <= planned.calls_per_step[1]);
  CHECK(planned.calls_per_step.back() == 0);
  INFO(race_report());
  CHECK(simcuda_race_count() == 0);
}

}  // namespace

// Unmaps made at once here: with them deferred, this loop's moves are returns that cost no
// call (Note [Dormant mappings]; the next test case).
TEST_CASE("with a loop plan a loop that moves pages every step settles at zero device calls", "[loop_plans]") {
  const step_shape shape = three_block_rounds();
  core::cache_settings without_plans;
  without_plans.conf.loop_plans = false;
  without_plans.conf.page_move_budget = false;  // pure moving (Note [Move budget] would settle it by growing)
  without_plans.conf.deferred_unmaps = false;
  const loop_result moving = run_loop(without_plans, shape, 8);
  INFO("without plans, calls per step: " << moving.calls_per_step.back());
  REQUIRE(moving.calls_per_step.back() > 0);  // the shape is one that needs a plan
  CHECK(moving.patterns_intact);

  core::cache_settings with_plans;
  with_plans.conf.deferred_unmaps = false;
  const loop_result planned = run_loop(with_plans, shape, 8);
  INFO("with plans, calls per step: " << planned.calls_per_step[4] << " " << planned.calls_per_step.back());
  CHECK(planned.patterns_intact);
  CHECK(planned.stats.num_loop_plans == 1);
  CHECK(planned.stats.num_loop_plans_abandoned == 0);
  CHECK(planned.stats.num_planned_allocations >= 4 * static_cast<std::int64_t>(shape.sizes.size()));
  for (std::size_t step = 4; step < planned.calls_per_step.size(); ++step) CHECK(planned.calls_per_step[step] == 0);
  // The plan's pages come from the pages the loop already had (moved, not added).
  INFO("peak reserved " << planned.peak_reserved_bytes << " without plans " << moving.peak_reserved_bytes);
  CHECK(planned.peak_reserved_bytes <= moving.peak_reserved_bytes + static_cast<std::int64_t>(2 * kPage));
  INFO(race_report());
  CHECK(simcuda_race_count() == 0);
}

TEST_CASE("with deferred unmaps a loop that moves pages every step settles at zero device calls unplanned",
          "[loop_plans][dormant]") {
  // The loop above, without plans and with pure moving: each step's moves take chunks back
  // where they lay dormant (Note [Dormant mappings]), so after the first steps no call is
  // made at all, at no more memory than moving with unmaps made at once.
  const step_shape shape = three_block_rounds();
  core::cache_settings settings;
  settings.conf.loop_plans = false;
  settings.conf.page_move_budget = false;
  settings.conf.deferred_unmaps = false;
  const loop_result at_once = run_loop(settings, shape, 8);
  settings.conf.deferred_unmaps = true;
  const loop_result deferred = run_loop(settings, shape, 8);
  std::string calls;
  for (std::int64_t step_calls : deferred.calls_per_step) calls += std::to_string(step_calls) + " ";
  INFO("calls per step: " << calls << "; page moves " << deferred.stats.num_page_moves << ", returns "
                          << deferred.stats.num_dormant_returns);
  CHECK(deferred.patterns_intact);
  CHECK(deferred.stats.num_dormant_returns > 0);
  CHECK(deferred.calls_per_step.back() == 0);
  CHECK(device_calls(deferred.stats) < device_calls(at_once.stats));
  CHECK(deferred.peak_reserved_bytes <= at_once.peak_reserved_bytes);
  INFO(race_report());
  CHECK(simcuda_race_count() == 0);
}

TEST_CASE("a plan's range lies over the loop's own free pages, so its hand-over moves only what is missing",
          "[loop_plans]") {
  // The loop's pages lie below a fence block kept throughout, so the top of the free
  // address space is above the fence, away from every page the loop has. Unmaps are made
  // at once: deferred, the loop's moves are returns and it needs no plan.
  const step_shape shape = rounds_among_steady_blocks(24);
  core::cache_settings settings;
  settings.conf.deferred_unmaps = false;
  const loop_result planned = run_loop(settings, shape, 8, -1, 112 * kMiB);
  // (A range at the top of the free address space, above the fence, had all 55 of its
  // pages moved in: 110 calls against 52.)
  check_cheap_hand_over(planned);
  // The plan's pages were the loop's: memory stays below the fence (56 pages) plus the
  // fence's own page and the allowance's few pages.
  INFO("peak reserved " << planned.peak_reserved_bytes);
  CHECK(planned.peak_reserved_bytes <= static_cast<std::int64_t>(60 * kPage));
}

TEST_CASE("a plan's range is not split by the small pool's empty slabs", "[loop_plans]") {
  // An empty slab (the small pool's cache of its class) sits 60 MiB into the range, among
  // the loop's pages: the plan's span (55 pages) fits below it only once it is given back.
  const step_shape shape = rounds_among_steady_blocks(24);
  core::cache_settings settings;
  settings.exact_start_allocations = 0;  // small blocks go to slabs at once (Note [Exact start])
  const loop_result planned = run_loop(settings, shape, 8, -1, 60 * kMiB, 4096);
  // (With the slab left in place, that step made 58 calls against 20.)
  check_cheap_hand_over(planned);
}

TEST_CASE("a planned block waits only for the streams that freed its own bytes", "[loop_plans][streams]") {
  // Note [Streams per piece]: the plan's range remembers streams per piece. Merged into one
  // range at each step's end, it remembered both streams, and every block of a planned
  // step was ordered after the other stream (a wait, or a standing one).
  const step_shape shape = steady_blocks_beside_one_stream_rounds(8);
  const loop_result planned = run_loop(core::cache_settings{}, shape, 8);
  std::string reuses;
  for (std::int64_t step_reuses : planned.reuses_across_streams_per_step) reuses += std::to_string(step_reuses) + " ";
  INFO("reuses across streams per step: " << reuses);
  CHECK(planned.patterns_intact);
  CHECK(planned.stats.num_loop_plans == 1);
  CHECK(planned.stats.num_loop_plans_abandoned == 0);
  CHECK(planned.calls_per_step.back() == 0);
  REQUIRE(planned.stats.num_planned_allocations >= static_cast<std::int64_t>(shape.sizes.size()));
  CHECK(planned.reuses_across_streams_per_step.back() == 0);
  INFO(race_report());
  CHECK(simcuda_race_count() == 0);
}

TEST_CASE("a planned step of streams taking turns reuses its places within each stream", "[loop_plans][streams]") {
  // Note [Stream affinity]: the layout, by size and lifetime, puts one stream's blocks where
  // the others' were; within the same span the stage moves them to places their own stream
  // left.
  const step_shape shape = interleaved_streams(GENERATE(1u, 2u, 3u));
  core::cache_settings without_affinity;
  without_affinity.conf.loop_plan_stream_affinity = false;
  const loop_result plain = run_loop(without_affinity, shape, 8);
  const loop_result affine = run_loop(core::cache_settings{}, shape, 8);
  INFO("reuses across streams in the last step: " << plain.reuses_across_streams_per_step.back() << " without, "
                                                  << affine.reuses_across_streams_per_step.back() << " with");
  for (const loop_result* run : {&plain, &affine}) {
    CHECK(run->patterns_intact);
    CHECK(run->stats.num_loop_plans == 1);
    CHECK(run->stats.num_loop_plans_abandoned == 0);
    CHECK(run->calls_per_step.back() == 0);
  }
  REQUIRE(plain.reuses_across_streams_per_step.back() > 0);  // the shape is one that crosses
  CHECK(affine.reuses_across_streams_per_step.back() < plain.reuses_across_streams_per_step.back());
  CHECK(affine.peak_reserved_bytes == plain.peak_reserved_bytes);  // the same span
  INFO(race_report());
  CHECK(simcuda_race_count() == 0);
}

TEST_CASE("a loop whose pages stay but whose streams wait for each other gets a plan, and no new peak",
          "[loop_plans][streams]") {
  // Note [Waits as churn]: with page_moves:false the loop never moves a page -- its memory
  // grows to what its step touches, then stays -- so only its cross-stream waits are churn.
  const step_shape shape = interleaved_streams(GENERATE(1u, 2u, 3u));
  core::cache_settings creating;
  creating.conf.page_moves = false;
  core::cache_settings unplanned = creating;
  unplanned.conf.loop_plans = false;
  const loop_result plain = run_loop(unplanned, shape, 10);
  const loop_result planned = run_loop(creating, shape, 10);
  INFO("reuses across streams in the last step: " << plain.reuses_across_streams_per_step.back() << " without a plan, "
                                                  << planned.reuses_across_streams_per_step.back() << " with");
  CHECK(planned.patterns_intact);
  CHECK(planned.stats.num_page_moves == 0);
  CHECK(planned.stats.num_loop_plans == 1);
  CHECK(planned.stats.num_loop_plans_abandoned == 0);
  CHECK(planned.calls_per_step.back() == 0);
  REQUIRE(plain.reuses_across_streams_per_step.back() > 0);  // the loop waits every step unplanned
  CHECK(planned.reuses_across_streams_per_step.back() < plain.reuses_across_streams_per_step.back());
  CHECK(planned.peak_reserved_bytes <= plain.peak_reserved_bytes);
  INFO(race_report());
  CHECK(simcuda_race_count() == 0);
}

TEST_CASE("a deviation from the step abandons the plan; data, memory and stats stay right", "[loop_plans]") {
  const step_shape shape = three_block_rounds();
  const loop_result result = run_loop(core::cache_settings{}, shape, 9, 5);
  CHECK(result.patterns_intact);
  CHECK(result.stats.num_loop_plans >= 1);
  CHECK(result.stats.num_loop_plans_abandoned == 1);
  INFO(race_report());
  CHECK(simcuda_race_count() == 0);
  // The deviating request is placed after the plan is left, so it may use the range's
  // free space and pages: at most the one page its extra 512 KiB may need is added.
  // (Placed while the range was still held, it went beside it on pages of its own.)
  const loop_result undeviated = run_loop(core::cache_settings{}, shape, 9);
  INFO("peak reserved " << result.peak_reserved_bytes << ", without the deviation " << undeviated.peak_reserved_bytes);
  CHECK(result.peak_reserved_bytes <= undeviated.peak_reserved_bytes + static_cast<std::int64_t>(kPage));
}
