// Helpers for tests of step layouts (step_layout_test, layout_repair_test,
// stream_affinity_test, skyline_and_ring_layout_test): blocks of a step made from phases,
// random and serving steps, the check every layout must pass, the checks and tally of a
// search over layouts, and the refined narrowest order's layout searches start from.
// Invariant: live_at and layout_faults follow the lifetimes' definition in
// core/step_layout.hpp (phase by phase, independent of lifetimes_meet).
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "core/step_layout.hpp"

namespace fragless::testing {

// Phases [begin, end) of a step of `phases`, wrapping past the end when end <= begin;
// placing starts at `start_phase`.
inline core::step_block make_block(std::size_t index, std::size_t size_bytes, std::size_t begin, std::size_t end,
                                   std::size_t phases, std::size_t start_phase) {
  core::step_block block{index, size_bytes, begin, end, 0};
  if (end <= begin) {
    block.first_end = phases;
    block.second_end = end;
  }
  block.from_start = (begin + phases - start_phase) % phases;
  return block;
}

inline bool live_at(const core::step_block& block, std::size_t phase) {
  return (phase >= block.first_begin && phase < block.first_end) || phase < block.second_end;
}

// Blocks live at a common phase that share a byte, and blocks that end past the span: a
// layout has none.
inline std::size_t layout_faults(const std::vector<core::step_block>& blocks, std::size_t phases, std::size_t span) {
  std::size_t found = 0;
  for (std::size_t a = 0; a < blocks.size(); ++a) {
    if (blocks[a].offset_bytes + blocks[a].size_bytes > span) ++found;
    for (std::size_t b = a + 1; b < blocks.size(); ++b) {
      bool meet = false;
      for (std::size_t phase = 0; phase < phases && !meet; ++phase) meet = live_at(blocks[a], phase) && live_at(blocks[b], phase);
      if (!meet) continue;
      const bool apart = blocks[a].offset_bytes + blocks[a].size_bytes <= blocks[b].offset_bytes ||
                         blocks[b].offset_bytes + blocks[b].size_bytes <= blocks[a].offset_bytes;
      if (!apart) ++found;
    }
  }
  return found;
}

// The most bytes live at once, phase by phase.
inline std::size_t peak_live_bytes(const std::vector<core::step_block>& blocks, std::size_t phases) {
  std::size_t peak = 0;
  for (std::size_t phase = 0; phase < phases; ++phase) {
    std::size_t live = 0;
    for (const core::step_block& block : blocks) live += live_at(block, phase) ? block.size_bytes : 0;
    peak = std::max(peak, live);
  }
  return peak;
}

// Random lifetimes over a step of `phases`, a fifth of them wrapping past its end.
// `max_length`: lifetimes of at most that many phases (0: up to the whole step), but for
// one block in `long_one_in` (0: none), whose lifetime may be any length.
inline std::vector<core::step_block> random_step(std::uint32_t seed, std::size_t count, std::size_t phases,
                                                 std::size_t max_length = 0, std::size_t long_one_in = 0) {
  std::mt19937 random(seed);
  std::vector<core::step_block> blocks;
  for (std::size_t index = 0; index < count; ++index) {
    const std::size_t size_bytes = std::size_t{512} << (random() % 16);
    const std::size_t begin = random() % phases;
    const bool long_lived = max_length == 0 || (long_one_in > 0 && random() % long_one_in == 0);
    const std::size_t length = 1 + random() % (long_lived ? phases - 1 : max_length);
    std::size_t end = begin + length;
    if (end >= phases) end = random() % 5 == 0 ? end - phases : phases - 1;
    if (end == begin) end = begin + 1;
    blocks.push_back(make_block(index, size_bytes, begin, end, phases, seed % phases));
  }
  return blocks;
}

// A serving step: `caches` KV caches grow the eager way -- each decode iteration makes
// every cache `growth` units longer (the new block made, then the old one freed) beside a
// small scratch block -- and leave at the step's end. Phases count allocations and frees.
inline std::vector<core::step_block> growing_caches_step(std::uint32_t seed, std::size_t caches, std::size_t iterations,
                                            std::size_t* phases_out) {
  std::mt19937 random(seed);
  constexpr std::size_t kUnitBytes = 64 * 1024;
  struct lifetime {
    std::size_t size_bytes, begin, end;
  };
  std::vector<lifetime> lifetimes;
  std::size_t phase = 0;
  std::vector<std::size_t> lengths, current;
  for (std::size_t cache = 0; cache < caches; ++cache) {
    lengths.push_back(1 + random() % 64);
    current.push_back(lifetimes.size());
    lifetimes.push_back({lengths.back() * kUnitBytes, phase++, 0});
  }
  const std::size_t growth = 1 + random() % 8;
  for (std::size_t iteration = 0; iteration < iterations; ++iteration) {
    const std::size_t scratch = lifetimes.size();
    lifetimes.push_back({kUnitBytes, phase++, 0});
    for (std::size_t cache = 0; cache < caches; ++cache) {
      lengths[cache] += growth;
      lifetimes.push_back({lengths[cache] * kUnitBytes, phase++, 0});
      lifetimes[current[cache]].end = phase++;
      current[cache] = lifetimes.size() - 1;
    }
    lifetimes[scratch].end = phase++;
  }
  for (std::size_t index : current) lifetimes[index].end = phase++;
  std::vector<core::step_block> blocks;
  for (std::size_t index = 0; index < lifetimes.size(); ++index)
    blocks.push_back(make_block(index, lifetimes[index].size_bytes, lifetimes[index].begin, lifetimes[index].end, phase, 0));
  *phases_out = phase;
  return blocks;
}

// What a search of layouts (blocks, span, cancel -> span) did over several steps, each from
// a layout given: steps above their peak before it, narrowed, narrowed to the peak, and the
// geometric means over the peaks before and after.
struct searched_steps {
  std::size_t steps = 0, above_peak = 0, narrower = 0, reached_peak = 0;
  double log_before_sum = 0, log_after_sum = 0;

  // Runs `search` from `start`, a layout of span `start_span` of a step of `phases` phases
  // and peak `peak`, and checks that it narrows or keeps the layout, lays out validly, at
  // or above the peak, the same when run again, and leaves a layout it does not narrow as
  // it was; counts the result.
  template <typename Search>
  void add(Search search, const std::vector<core::step_block>& start, std::size_t start_span, std::size_t peak,
           std::size_t phases) {
    std::vector<core::step_block> searched = start, again = start;
    const std::size_t span = search(searched, start_span, nullptr);
    CHECK(span <= start_span);
    CHECK(span >= peak);
    CHECK(layout_faults(searched, phases, span) == 0);
    CHECK(search(again, start_span, nullptr) == span);
    for (std::size_t index = 0; index < start.size(); ++index) {
      CHECK(again[index].offset_bytes == searched[index].offset_bytes);
      if (span == start_span) CHECK(searched[index].offset_bytes == start[index].offset_bytes);  // kept as it was
    }
    ++steps;
    if (start_span > peak) ++above_peak;
    if (span < start_span) ++narrower;
    if (start_span > peak && span == peak) ++reached_peak;
    log_before_sum += std::log(static_cast<double>(start_span) / static_cast<double>(peak));
    log_after_sum += std::log(static_cast<double>(span) / static_cast<double>(peak));
  }
  double before() const { return std::exp(log_before_sum / static_cast<double>(steps)); }
  double after() const { return std::exp(log_after_sum / static_cast<double>(steps)); }
};

// The narrowest order's layout (the earliest among equal spans, as the layout race keeps,
// Note [Layout race]) and its placing sequence. Sets `blocks` and `sequence`; returns the span.
inline std::size_t narrowest_order(const std::vector<core::step_block>& step, std::vector<core::step_block>* blocks,
                                   std::vector<std::size_t>* sequence) {
  std::size_t narrowest = SIZE_MAX;
  for (core::layout_order order : core::kLayoutOrders) {
    std::vector<core::step_block> laid_out = step;
    const std::size_t span = core::lay_out(laid_out, order, nullptr);
    if (span < narrowest) {
      narrowest = span;
      *blocks = laid_out;
      *sequence = core::placing_order(step, order);
    }
  }
  return narrowest;
}

// That layout refined (Note [Layout refinement]): what the skyline search starts from.
inline std::size_t refined_narrowest(const std::vector<core::step_block>& step, std::vector<core::step_block>* blocks) {
  std::vector<std::size_t> sequence;
  const std::size_t narrowest = narrowest_order(step, blocks, &sequence);
  return core::refine_layout(*blocks, sequence, narrowest, nullptr);
}

}  // namespace fragless::testing
