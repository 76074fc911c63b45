// A loop plan's moves and the move budget (Note [Move budget], Note [Loop plans]), on a
// generated corpus workload replayed twice on simcuda, the way the benchmark replays it:
// pipeline-1f1b seed 57 forms loop plans that move the loop's pages into the plan's range
// and are later abandoned. Those moves are the plan's cost and are not charged to the
// budget; when they were, the budget, once planning had failed, refused every move until
// as many pages had been created as the plans had moved -- 1.05x the peak of live bytes
// with 2 MiB pages and 1.37x with physical chunks, where each stays within 1.03x now.
// A chunk larger than a planned block's run may also land with its surplus on the plan's
// next pages (Note [Physical chunks]), so the chunked replay follows its plans without
// growing past them. And a churning loop whose layout is a few percent wide is planned
// rather than left to the move budget (Note [Loop plans], loop_plan_churn_headroom).
#include <catch2/catch.hpp>

#include <simcuda/control.h>

#include <unordered_map>
#include <vector>

#include "consistency.hpp"
#include "simcuda_support.hpp"
#include "workloads/corpus.hpp"

using namespace fragless;
using namespace fragless::testing;

namespace {

struct replay_result {
  std::int64_t peak_reserved_bytes = 0;
  std::uint64_t peak_live_bytes = 0;
  device_stats stats;
  std::uint64_t failed = 0;
};

// Replays `passes` times; blocks still live at the end of a pass are freed before the next.
replay_result replay(const core::cache_settings& settings, const fragless::traces::trace& workload, int passes) {
  reset_simcuda();
  auto instance = make_simcuda_allocator(settings);
  core::device_cache& cache = instance->device(0);
  std::vector<void*> streams;
  for (std::uint32_t index = 0; index < workload.stream_count; ++index) streams.push_back(create_stream());
  replay_result result;
  for (int pass = 0; pass < passes; ++pass) {
    std::unordered_map<std::uint64_t, std::pair<void*, std::uint64_t>> live;
    std::uint64_t live_bytes = 0;
    for (const auto& event : workload.events) {
      if (event.op == fragless::traces::trace_op::alloc) {
        void* pointer = instance->allocate(event.size_bytes, 0, streams[event.stream_index]);
        if (pointer == nullptr) {
          ++result.failed;
          continue;
        }
        live[event.block_id] = {pointer, event.size_bytes};
        live_bytes += event.size_bytes;
        result.peak_live_bytes = std::max(result.peak_live_bytes, live_bytes);
      } else if (auto found = live.find(event.block_id); found != live.end()) {
        instance->deallocate(found->second.first);
        live_bytes -= found->second.second;
        live.erase(found);
      }
    }
    for (auto& [id, block] : live) instance->deallocate(block.first);
  }
  simcuda_complete_all();
  result.stats = cache.stats();
  result.peak_reserved_bytes = result.stats.reserved_bytes[pool_all].peak;
  check_consistency(cache.snapshot(), result.stats);
  check_releases_everything(cache);
  for (void* stream : streams) destroy_stream(stream);
  return result;
}

// Every request served, plans followed, peak reserved within `bound` x the peak of live
// bytes (1.03 unless said), no race.
void check_planned_replay(const replay_result& result, double bound = 1.03) {
  CHECK(result.failed == 0);
  CHECK(result.stats.num_loop_plans >= 1);
  const double over_live =
      static_cast<double>(result.peak_reserved_bytes) / static_cast<double>(result.peak_live_bytes);
  INFO("peak reserved / peak live " << over_live);
  CHECK(over_live <= bound);
  INFO(race_report());
  CHECK(simcuda_race_count() == 0);
}

}  // namespace

TEST_CASE("a loop plan's moves are not charged to the move budget", "[growth][loop_plans]") {
  const fragless::traces::trace workload = bench::generate_corpus_workload("pipeline-1f1b", 57);
  core::cache_settings paged;
  paged.conf.physical_chunk_fraction = 0;
  core::cache_settings chunked;
  chunked.conf.physical_chunk_fraction = 1.0 / 256;
  for (const core::cache_settings* settings : {&paged, &chunked}) {
    INFO("physical_chunk_fraction " << settings->conf.physical_chunk_fraction);
    const replay_result result = replay(*settings, workload, 2);
    // The mechanism is there: plans were abandoned.
    CHECK(result.stats.num_loop_plans_abandoned >= 1);
    check_planned_replay(result);
  }
}

// Note [Physical chunks]: a planned block may take a cached chunk larger than its run, the
// surplus landing on the plan's next unmapped pages. When the surplus could not enter the
// plan's range, a loop with large chunks (here 1/32 of reserved memory) found no chunk that
// fit its planned runs and created new ones at every hand-over: moe-routing seed 34 of the
// corpus reached 1.35x the peak of live bytes over four passes; it stays within 1.03x now.
// Laid over the loop's own pages (Note [Loop plans]), its range lacks a few scattered pages
// no chunk fits: created on top of the old chunks they gave 1.031x, and 1.015x once a
// planned run that cannot take a chunk first releases one outside the range.
TEST_CASE("with physical chunks a loop plan takes the loop's chunks, surplus and all", "[chunks][loop_plans]") {
  const fragless::traces::trace workload = bench::generate_corpus_workload("moe-routing", 34);
  core::cache_settings chunked;
  chunked.conf.physical_chunk_fraction = 1.0 / 32;
  check_planned_replay(replay(chunked, workload, 4));
}

// Note [Loop plans]: a plan wider than loop_plan_headroom is weighed against what the loop
// churns without one. many-streams seed 22 of the corpus moves many pages a step; its best
// layout is a few percent wider than its step's peak. Refused, the move budget created the
// pages the loop kept lacking, and over five passes reserved memory reached 1.33x the peak
// of live bytes with no plan; paid for by its churn, the plan is followed: 1.057x.
TEST_CASE("a churning loop whose layout is a few percent wide is planned", "[growth][loop_plans]") {
  const fragless::traces::trace workload = bench::generate_corpus_workload("many-streams", 22);
  check_planned_replay(replay(core::cache_settings{}, workload, 5), 1.10);
}
