// Ring layout: the last stage of a step's layout (Note [Ring layout] in ring_layout.cpp).
// Where the greedy orders, refining and the skyline search (step_layout.hpp,
// skyline_layout.hpp) leave a step wider than its peak, the blocks are placed once more in
// the order the step makes them, each at the first place at or after the previous one
// that fits under a fixed width, wrapping to the bottom at the top -- a ring buffer -- at
// the narrowest width that takes them all, and that layout settled: each block moved down
// to the lowest place it fits; then once more with the shorter-lived half of the blocks
// kept off the ring's cursor, the narrower kept.
// Invariant: the blocks' offsets change only to a layout that overlaps no two blocks whose
// lifetimes meet and spans less than the span given; the same blocks give the same layout.
// Plain C++, no device calls, no shared state: the caller owns the blocks.
#pragma once

#include <atomic>
#include <cstddef>
#include <vector>

#include "core/step_layout.hpp"

namespace fragless::core {

// Searches for a ring layout of `blocks` (a step of `phases` phases, whose live bytes
// peak at `peak_bytes`) narrower than `span_bytes`, the span of the layout they hold;
// where it finds one, sets the blocks' offsets to it and returns its span, else leaves
// them and returns `span_bytes`. Returns 0 when `cancel` is set. Throws only
// std::bad_alloc.
std::size_t ring_layout(std::vector<step_block>& blocks, std::size_t phases, std::size_t peak_bytes,
                        std::size_t span_bytes, const std::atomic<bool>* cancel);

}  // namespace fragless::core
