// Helpers for tests of step layouts (step_layout_test, stream_affinity_test): blocks of a
// step made from phases, and the check every layout must pass.
// Invariant: live_at and layout_faults follow the lifetimes' definition in
// core/step_layout.hpp (phase by phase, independent of lifetimes_meet).
#pragma once

#include <cstddef>
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

}  // namespace fragless::testing
