// Offset order: a step layout's blocks kept in address order as their offsets change, so
// that a search wanting the blocks one block meets, by address, walks the list through a
// row of meeting bits instead of sorting them (Note [Repair gathering] in
// layout_repair.cpp, Note [Affinity scan] in stream_affinity.cpp).
// Invariant: the caller's list holds each block's index once, sorted by the caller's
// order, provided every change of a block's offset goes through reorder_after().
// Plain C++, no shared state.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace fragless::core {

// Makes `change()` -- which changes block `index`'s place in the order `before` -- and
// moves the index to its new place in `order`, shifting only the entries between.
template <typename Before, typename Change>
void reorder_after(std::vector<std::uint32_t>& order, std::uint32_t index, const Before& before, Change&& change) {
  const auto from = std::lower_bound(order.begin(), order.end(), index, before);
  change();
  if (from + 1 != order.end() && before(*(from + 1), index))
    std::rotate(from, from + 1, std::lower_bound(from + 1, order.end(), index, before));
  else if (from != order.begin() && before(index, *(from - 1)))
    std::rotate(std::lower_bound(order.begin(), from, index, before), from, from + 1);
}

// Whether a walk of all `total` blocks costs less than sorting the `count` wanted.
inline bool walk_beats_sort(std::size_t count, std::size_t total) noexcept {
  return count * static_cast<std::size_t>(std::bit_width(count)) >= total;
}

}  // namespace fragless::core
