// Layout repair: the last stage of a step's layout (Note [Layout repair] in
// layout_repair.cpp). Where every earlier stage (step_layout.hpp) leaves a step wider than
// its peak, the blocks that end above a target a little under the span are pushed back in
// under it, evicting others into the gaps they find, the blocks that keep failing made
// heavier; when none is left out, the target is lowered.
// Invariant: the blocks' offsets change only to a layout that overlaps no two blocks whose
// lifetimes meet and spans no more than the span given; the same blocks give the same
// layout.
// Plain C++, no device calls, no shared state: the caller owns the blocks.
#pragma once

#include <atomic>
#include <cstddef>
#include <vector>

#include "core/step_layout.hpp"

namespace fragless::core {

// Repairs the layout `blocks` hold, of span `span_bytes`, towards the step's peak
// `peak_bytes`; sets the blocks' offsets to the narrowest layout found and returns its span
// (`span_bytes` where none is narrower, 0 when `cancel` is set). A step of fewer than
// kLayoutThreadBlocks blocks, laid out on the allocating thread, gets less work (Note
// [Layout threads]). Throws only std::bad_alloc.
std::size_t repair_layout(std::vector<step_block>& blocks, std::size_t span_bytes, std::size_t peak_bytes,
                          const std::atomic<bool>* cancel);

}  // namespace fragless::core
