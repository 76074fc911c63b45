// Stream affinity (Note [Stream affinity]): moving blocks within a settled step layout
// keeps it valid and as wide, never adds a cross-stream neighbour, removes them where a
// place of the block's own stream is free over its lifetime, leaves a one-stream step and
// an oversized step alone, gives the same layout every time, and stops when cancelled.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <random>
#include <vector>

#include "core/step_layout.hpp"
#include "core/stream_affinity.hpp"
#include "step_blocks.hpp"

using fragless::core::cross_stream_neighbours;
using fragless::core::kStreamAffinityMaxBlocks;
using fragless::core::lay_out_narrowest;
using fragless::core::layout_threads;
using fragless::core::settle_stream_affinity;
using fragless::core::step_block;
using fragless::testing::layout_faults;

namespace {

step_block stream_block(std::size_t index, std::size_t size_bytes, std::size_t begin, std::size_t end,
                        std::size_t phases, std::uint32_t stream) {
  step_block block = fragless::testing::make_block(index, size_bytes, begin, end, phases, 0);
  block.stream_index = stream;
  return block;
}

// A step of `count` blocks over `streams` streams, each phase one event: a block is made
// at a distinct phase and freed at a later distinct one (a fifth wrap past the end).
std::vector<step_block> random_step(std::uint32_t seed, std::size_t count, std::uint32_t streams,
                                    std::size_t* phases_out) {
  std::mt19937 random(seed);
  const std::size_t phases = 2 * count;
  std::vector<std::size_t> order(phases);
  for (std::size_t phase = 0; phase < phases; ++phase) order[phase] = phase;
  std::shuffle(order.begin(), order.end(), random);
  std::vector<step_block> blocks;
  for (std::size_t index = 0; index < count; ++index) {
    std::size_t begin = order[2 * index], end = order[2 * index + 1];
    if (end < begin && random() % 5 != 0) std::swap(begin, end);
    const std::size_t size_bytes = std::size_t{512} << (random() % 12);
    blocks.push_back(stream_block(begin, size_bytes, begin, end, phases, static_cast<std::uint32_t>(random() % streams)));
  }
  *phases_out = phases;
  return blocks;
}

}  // namespace

TEST_CASE("stream affinity keeps random layouts valid and as wide, with fewer cross-stream neighbours") {
  std::size_t before_total = 0, after_total = 0;
  for (std::uint32_t seed = 1; seed <= 24; ++seed) {
    std::size_t phases = 0;
    std::vector<step_block> blocks = random_step(seed, 40 + seed * 7, 2 + seed % 5, &phases);
    std::vector<step_block> laid = blocks;
    for (step_block& block : laid) block.stream_index = 0;  // the layout alone, streams aside
    const std::size_t span = lay_out_narrowest(laid, phases, nullptr, layout_threads::none);
    REQUIRE(span > 0);
    for (std::size_t index = 0; index < blocks.size(); ++index) blocks[index].offset_bytes = laid[index].offset_bytes;
    REQUIRE(layout_faults(blocks, phases, span) == 0);
    const std::size_t before = cross_stream_neighbours(blocks, phases);
    settle_stream_affinity(blocks, phases, span, nullptr);
    const std::size_t after = cross_stream_neighbours(blocks, phases);
    CAPTURE(seed, before, after);
    CHECK(layout_faults(blocks, phases, span) == 0);
    CHECK(after <= before);
    before_total += before;
    after_total += after;
    // The same blocks give the same layout.
    std::vector<step_block> again = laid;
    for (std::size_t index = 0; index < again.size(); ++index) again[index].stream_index = blocks[index].stream_index;
    settle_stream_affinity(again, phases, span, nullptr);
    for (std::size_t index = 0; index < again.size(); ++index) CHECK(again[index].offset_bytes == blocks[index].offset_bytes);
  }
  CAPTURE(before_total, after_total);
  CHECK(after_total * 10 < before_total * 9);  // more than a tenth fewer over the seeds
}

TEST_CASE("a place left by a block's own stream is taken over") {
  // Streams A and B, one event a phase: A0 and B0 live together, then B1 and A1. Laid out
  // crosswise (A0 then B1 at 0, B0 then A1 at 4096, 8192 unused), each place passes
  // between the streams twice a step; within the span each block can move to a place
  // whose other holder is of its own stream, or that no one else holds.
  constexpr std::size_t kPhases = 8;
  std::vector<step_block> blocks = {
      stream_block(0, 4096, 0, 2, kPhases, 0),  // A0: phases 0-1
      stream_block(1, 4096, 1, 3, kPhases, 1),  // B0: phases 1-2
      stream_block(4, 4096, 4, 6, kPhases, 1),  // B1: phases 4-5
      stream_block(5, 4096, 5, 7, kPhases, 0),  // A1: phases 5-6
  };
  blocks[0].offset_bytes = 0;
  blocks[1].offset_bytes = 4096;
  blocks[2].offset_bytes = 0;
  blocks[3].offset_bytes = 4096;
  REQUIRE(layout_faults(blocks, kPhases, 3 * 4096) == 0);
  REQUIRE(cross_stream_neighbours(blocks, kPhases) == 4);  // each reuse, and each again a step later
  CHECK(settle_stream_affinity(blocks, kPhases, 3 * 4096, nullptr) > 0);
  CHECK(layout_faults(blocks, kPhases, 3 * 4096) == 0);
  CHECK(cross_stream_neighbours(blocks, kPhases) == 0);
  CHECK(blocks[1].offset_bytes == blocks[2].offset_bytes);  // B0 took over where B1 is
}

TEST_CASE("one stream, or too many blocks, leaves the layout alone") {
  std::size_t phases = 0;
  std::vector<step_block> blocks = random_step(7, 200, 1, &phases);
  const std::size_t span = lay_out_narrowest(blocks, phases, nullptr, layout_threads::none);
  const std::vector<step_block> laid = blocks;
  CHECK(settle_stream_affinity(blocks, phases, span, nullptr) == 0);
  for (std::size_t index = 0; index < blocks.size(); ++index) CHECK(blocks[index].offset_bytes == laid[index].offset_bytes);

  std::vector<step_block> many(kStreamAffinityMaxBlocks + 1);
  for (std::size_t index = 0; index < many.size(); ++index)
    many[index] = stream_block(2 * index, 512, 2 * index, 2 * index + 1, 2 * many.size(), static_cast<std::uint32_t>(index % 2));
  CHECK(settle_stream_affinity(many, 2 * many.size(), 512, nullptr) == 0);
}

TEST_CASE("a cancelled stream affinity stage stops with a valid layout") {
  std::size_t phases = 0;
  std::vector<step_block> blocks = random_step(11, 300, 4, &phases);
  std::vector<step_block> laid = blocks;
  for (step_block& block : laid) block.stream_index = 0;
  const std::size_t span = lay_out_narrowest(laid, phases, nullptr, layout_threads::none);
  for (std::size_t index = 0; index < blocks.size(); ++index) blocks[index].offset_bytes = laid[index].offset_bytes;
  std::atomic<bool> cancelled{true};
  CHECK(settle_stream_affinity(blocks, phases, span, &cancelled) == 0);
  CHECK(layout_faults(blocks, phases, span) == 0);
  CHECK(lay_out_narrowest(blocks, phases, &cancelled, layout_threads::none) == 0);
}

