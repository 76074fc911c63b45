// Tests of the layout bench's step instances (bench/layout): a hand trace's pass as a step
// (large requests only, lifetimes in request order, what is left freed at the end, the peak),
// the validity check on good and overlapping layouts, and libfragless's layout of corpus
// seeds' passes checked valid and never narrower than the step's peak.
#include <catch2/catch.hpp>

#include "layout/step_instance.hpp"
#include "test_scale.hpp"
#include "workloads/corpus.hpp"

#include <string>

using namespace fragless::bench;
using fragless::traces::trace;
using fragless::traces::trace_event;
using fragless::traces::trace_op;

namespace {

constexpr std::uint64_t MiB = 1024 * 1024;

trace hand_trace() {
  trace t;
  t.name = "hand";
  t.stream_count = 2;
  t.events = {
      {trace_op::alloc, 0, 1, 4 * MiB},   // phase 0
      {trace_op::alloc, 1, 2, 1000},      // small: a slab's object, not in the step
      {trace_op::alloc, 1, 3, 2 * MiB},   // phase 1, the second stream
      {trace_op::free, 0, 1, 4 * MiB},    // phase 2
      {trace_op::alloc, 0, 4, 3 * MiB + 1},  // phase 3, rounded to 512 B
      {trace_op::free, 1, 2, 1000},       // small
      {trace_op::free, 0, 9, 8 * MiB},    // a block made before the window: skipped
  };
  return t;
}

}  // namespace

TEST_CASE("a pass becomes a step of its large requests", "[bench][layout]") {
  const step_instance instance = step_instance_of(hand_trace());
  REQUIRE(instance.blocks.size() == 3);
  // Blocks 3 and 4 are left at the end: freed there, the last made first (phases 4 and 5).
  CHECK(instance.phases == 6);
  CHECK(instance.blocks[0].size_bytes == 4 * MiB);
  CHECK(instance.blocks[0].first_begin == 0);
  CHECK(instance.blocks[0].first_end == 2);
  CHECK(instance.blocks[1].first_begin == 1);
  CHECK(instance.blocks[1].first_end == 5);
  CHECK(instance.blocks[1].stream_index == 1);
  CHECK(instance.blocks[2].size_bytes == 3 * MiB + 512);
  CHECK(instance.blocks[2].first_begin == 3);
  CHECK(instance.blocks[2].first_end == 4);
  CHECK(instance.blocks[2].stream_index == 0);
  CHECK(instance.peak_bytes == 6 * MiB);  // blocks 1 and 3 at phase 1; 3 and 4 later are 5 MiB
  const std::string text = format_step_instance(instance);
  CHECK(text.rfind("fragless-step 1\nphases 6\npeak 6291456\n", 0) == 0);
  CHECK(text.find("3146240 3 4 0 0\n") != std::string::npos);
}

TEST_CASE("the validity check finds two live blocks sharing a byte", "[bench][layout]") {
  step_instance instance = step_instance_of(hand_trace());
  // Blocks 0 and 1 meet (phases 1-2); block 2 meets only block 1.
  instance.blocks[0].offset_bytes = 0;
  instance.blocks[1].offset_bytes = 4 * MiB;
  instance.blocks[2].offset_bytes = 0;  // where block 0 was: it is gone by then
  std::string conflict;
  CHECK(layout_is_valid(instance.blocks, &conflict));
  instance.blocks[1].offset_bytes = 4 * MiB - 512;  // one 512 B unit under block 0's end
  CHECK_FALSE(layout_is_valid(instance.blocks, &conflict));
  CHECK(conflict.find("phases 0 and 1") != std::string::npos);
}

TEST_CASE("libfragless lays every family's pass out validly, never below its peak", "[bench][layout]") {
  for (const std::string& family : corpus_families()) {
    // Two seeds, one under a sanitizer (Note [Sanitizer scale]).
    for (std::uint64_t seed = 1; seed <= static_cast<std::uint64_t>(fragless::testing::for_build(2)); ++seed) {
      INFO(family << " seed " << seed);
      step_instance instance = step_instance_of(generate_corpus_workload(family, seed));
      REQUIRE_FALSE(instance.blocks.empty());
      const std::size_t span =
          fragless::core::lay_out_narrowest(instance.blocks, instance.phases, nullptr, fragless::core::layout_threads::none);
      std::string conflict;
      CHECK(layout_is_valid(instance.blocks, &conflict));
      INFO(conflict);
      CHECK(span >= instance.peak_bytes);
      std::size_t top = 0;
      for (const auto& block : instance.blocks) top = std::max(top, block.offset_bytes + block.size_bytes);
      CHECK(top <= span);
    }
  }
}
