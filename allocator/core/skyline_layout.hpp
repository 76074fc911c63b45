// Skyline layout: the last stage of a step's layout (Note [Skyline layout] in
// skyline_layout.cpp). Where the greedy orders and their refinement (step_layout.hpp) leave
// a step wider than its peak, a bounded search places the blocks lowest first, each resting
// on the blocks placed before it whose lifetimes meet its own, and keeps a layout only if
// it is narrower. Its turns place blocks in an order whose offsets never fall (Note
// [Canonical turns] in skyline_layout.cpp); where it narrowed a many-stream-like step that
// stays wide, randomized dives spread its alternatives over the step (Note [Skyline dives]).
// Invariant: the blocks' offsets change only to a layout that overlaps no two blocks whose
// lifetimes meet and spans less than the span given; the same blocks give the same layout.
// Plain C++, no device calls, no shared state: the caller owns the blocks.
#pragma once

#include <atomic>
#include <cstddef>
#include <vector>

#include "core/step_layout.hpp"

namespace fragless::core {

// Searches for a layout of `blocks` narrower than `span_bytes` (the span of the layout
// they hold); where it finds one, sets the blocks' offsets to the narrowest found and
// returns its span, else leaves them and returns `span_bytes`. Returns 0 when `cancel` is
// set. Throws only std::bad_alloc.
std::size_t skyline_layout(std::vector<step_block>& blocks, std::size_t span_bytes, const std::atomic<bool>* cancel);

// The dives skyline_layout makes where its area search narrowed a step that stays above its
// peak (Note [Skyline dives] in skyline_layout.cpp), on their own: the same contract.
std::size_t skyline_dives(std::vector<step_block>& blocks, std::size_t span_bytes, const std::atomic<bool>* cancel);

}  // namespace fragless::core
