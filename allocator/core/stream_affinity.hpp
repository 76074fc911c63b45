// Stream affinity: the stage of a step's layout that runs after the span is settled (Note
// [Stream affinity] in stream_affinity.cpp). Where a step's blocks come from more than one
// stream, blocks are moved, within the span, to places whose previous and next holders
// in the step are of their own stream, so that the loop's reuse of those places needs no
// cross-stream wait.
// Invariant: the blocks' offsets change only to a layout that overlaps no two blocks whose
// lifetimes meet and ends within the span given; the span never changes; the same blocks
// give the same layout.
// Plain C++, no device calls, no shared state: the caller owns the blocks.
#pragma once

#include <atomic>
#include <cstddef>
#include <vector>

#include "core/step_layout.hpp"

namespace fragless::core {

// A step of more blocks than this keeps its layout as it is: the stage is blocks^2 work.
inline constexpr std::size_t kStreamAffinityMaxBlocks = 4096;

// Moves blocks of `blocks` (a step of `phases` phases laid out within `span_bytes`) to
// places whose neighbours in time are of their own stream (step_block::stream_index),
// where that lowers the number of cross-stream neighbours; returns how many block moves
// it made. Does nothing for a step of one stream or of more than kStreamAffinityMaxBlocks
// blocks. Returns at once (with the blocks in a valid layout) when `cancel` is set.
// Throws only std::bad_alloc.
std::size_t settle_stream_affinity(std::vector<step_block>& blocks, std::size_t phases, std::size_t span_bytes,
                                   const std::atomic<bool>* cancel);

// The cross-stream neighbours of the layout: for each block, the distinct blocks of other
// streams that hold one of its bytes last before it is made or first after it is freed,
// the step repeating. A loop that follows the layout makes a cross-stream wait for at most
// this many reuses a step. For tests.
std::size_t cross_stream_neighbours(const std::vector<step_block>& blocks, std::size_t phases);

}  // namespace fragless::core
