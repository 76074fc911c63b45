// Step instances (see step_instance.hpp).
#include "layout/step_instance.hpp"

#include "core/size_classes.hpp"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <unordered_map>

namespace fragless::bench {

step_instance step_instance_of(const traces::trace& t) {
  step_instance instance;
  instance.name = t.name;
  std::unordered_map<std::uint64_t, std::size_t> open;  // block id -> index in blocks
  std::vector<std::uint32_t> stream_numbers(t.stream_count, UINT32_MAX);
  std::uint32_t streams_seen = 0;
  std::size_t phase = 0;
  for (const traces::trace_event& event : t.events) {
    if (core::is_small(static_cast<std::size_t>(event.size_bytes))) continue;  // a slab's object
    if (event.op == traces::trace_op::alloc) {
      core::step_block block{};
      block.phase = phase;
      block.size_bytes = core::rounded_request_bytes(static_cast<std::size_t>(event.size_bytes));
      block.first_begin = phase;
      block.first_end = SIZE_MAX;  // set at its free, or at the pass's end
      std::uint32_t& number = stream_numbers.at(event.stream_index);
      if (number == UINT32_MAX) number = streams_seen++;
      block.stream_index = number;
      open[event.block_id] = instance.blocks.size();
      instance.blocks.push_back(block);
      ++phase;
    } else {
      const auto found = open.find(event.block_id);
      if (found == open.end()) continue;  // made before the window (a snapshot's seeded block)
      instance.blocks[found->second].first_end = phase;
      open.erase(found);
      ++phase;
    }
  }
  // What is left is freed at the pass's end, as the replay does: one request each, the
  // block made last first.
  for (auto block = instance.blocks.rbegin(); block != instance.blocks.rend(); ++block)
    if (block->first_end == SIZE_MAX) block->first_end = phase++;
  instance.phases = phase;
  // Placing starts where a plan's would (the step's own order counts from there).
  instance.peak_bytes = core::set_step_start(instance.blocks, instance.phases).peak_bytes;
  return instance;
}

bool layout_is_valid(const std::vector<core::step_block>& blocks, std::string* conflict) {
  std::vector<std::size_t> by_offset(blocks.size());
  std::iota(by_offset.begin(), by_offset.end(), std::size_t{0});
  std::sort(by_offset.begin(), by_offset.end(),
            [&](std::size_t a, std::size_t b) { return blocks[a].offset_bytes < blocks[b].offset_bytes; });
  // Each block against the ones starting inside it, in offset order: every pair sharing a
  // byte is seen once.
  for (std::size_t i = 0; i < by_offset.size(); ++i) {
    const core::step_block& low = blocks[by_offset[i]];
    const std::size_t end = low.offset_bytes + low.size_bytes;
    for (std::size_t j = i + 1; j < by_offset.size() && blocks[by_offset[j]].offset_bytes < end; ++j) {
      const core::step_block& high = blocks[by_offset[j]];
      if (core::lifetimes_meet(static_cast<std::uint32_t>(low.first_begin), static_cast<std::uint32_t>(low.first_end),
                               static_cast<std::uint32_t>(low.second_end), static_cast<std::uint32_t>(high.first_begin),
                               static_cast<std::uint32_t>(high.first_end), static_cast<std::uint32_t>(high.second_end))) {
        if (conflict != nullptr)
          *conflict = "blocks made at phases " + std::to_string(low.phase) + " and " + std::to_string(high.phase) +
                      " share bytes at offset " + std::to_string(high.offset_bytes) + " while both are alive";
        return false;
      }
    }
  }
  return true;
}

std::string format_step_instance(const step_instance& instance) {
  std::string text = "fragless-step 1\nphases " + std::to_string(instance.phases) + "\npeak " +
                     std::to_string(instance.peak_bytes) + "\n";
  for (const core::step_block& block : instance.blocks)
    text += std::to_string(block.size_bytes) + " " + std::to_string(block.first_begin) + " " +
            std::to_string(block.first_end) + " " + std::to_string(block.second_end) + " " +
            std::to_string(block.stream_index) + "\n";
  return text;
}

}  // namespace fragless::bench
