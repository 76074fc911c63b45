// Phase max tree: a value per phase of a step, the largest of them (of all, or over a range
// of phases) read at once and a range of phases raised or lowered together -- the skyline
// search's bounds on what the blocks not placed yet hold at once (Note [Canonical turns] and
// Note [Skyline bound] in skyline_layout.cpp).
// Invariant: most() is the largest of the values given, after every add() since, and
// most_in(begin, end) the largest over [begin, end); add() and most_in() cost O(log
// phases), most() O(1).
// Plain C++, no shared state.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace fragless::core {

class phase_max_tree {
public:
  phase_max_tree() = default;
  explicit phase_max_tree(const std::vector<std::size_t>& values)
      : leaves_(std::bit_ceil(std::max<std::size_t>(values.size(), 1))), tree_(2 * leaves_, 0), added_(leaves_, 0) {
    for (std::size_t phase = 0; phase < values.size(); ++phase)
      tree_[leaves_ + phase] = static_cast<std::int64_t>(values[phase]);
    for (std::size_t node = leaves_ - 1; node > 0; --node) tree_[node] = std::max(tree_[2 * node], tree_[2 * node + 1]);
  }

  // Adds `amount` to the values of phases [begin, end) (end <= the phases given).
  void add(std::size_t begin, std::size_t end, std::int64_t amount) noexcept {
    if (begin >= end) return;
    std::size_t low = begin + leaves_, high = end + leaves_;
    const std::size_t first_leaf = low, last_leaf = high - 1;
    for (; low < high; low >>= 1, high >>= 1) {
      if (low & 1) raise(low++, amount);
      if (high & 1) raise(--high, amount);
    }
    refresh_above(first_leaf);
    refresh_above(last_leaf);
  }

  // The largest value (0 for no phases; values never go below 0 in use).
  std::size_t most() const noexcept { return tree_.empty() ? 0 : static_cast<std::size_t>(tree_[1]); }

  // The largest value over phases [begin, end) (0 where the range is empty), in O(log
  // phases): the nodes that cover the range, each with the amounts added to the nodes
  // above it. Every node taken at the left edge lies under the node just left of the
  // edge one level up, and every one at the right edge under the edge itself, so each side
  // counts those nodes' added amounts as it climbs.
  std::size_t most_in(std::size_t begin, std::size_t end) const noexcept {
    if (begin >= end) return 0;
    std::int64_t left = 0, right = 0;
    bool left_taken = false, right_taken = false;
    const auto take = [](std::int64_t& side, bool& taken, std::int64_t value) {
      side = taken ? std::max(side, value) : value;
      taken = true;
    };
    std::size_t low = begin + leaves_, high = end + leaves_;
    while (low < high) {
      if (low & 1) take(left, left_taken, tree_[low++]);
      if (high & 1) take(right, right_taken, tree_[--high]);
      low >>= 1;
      high >>= 1;
      if (left_taken && low > 1) left += added_[low - 1];
      if (right_taken && high < leaves_ && high > 0) right += added_[high];
    }
    // Above where the edges met, the nodes over each side's own.
    for (std::size_t node = low - 1; left_taken && node > 1;) left += added_[node >>= 1];
    for (std::size_t node = high; right_taken && node > 1;) right += added_[node >>= 1];
    const std::int64_t most = !left_taken ? right : !right_taken ? left : std::max(left, right);
    return static_cast<std::size_t>(most);
  }

private:
  // A node holds the largest value below it, counting the amounts added to whole nodes on
  // the way (added_ of each inner node).
  void raise(std::size_t node, std::int64_t amount) noexcept {
    tree_[node] += amount;
    if (node < leaves_) added_[node] += amount;
  }
  void refresh_above(std::size_t node) noexcept {
    for (node >>= 1; node > 0; node >>= 1) tree_[node] = std::max(tree_[2 * node], tree_[2 * node + 1]) + added_[node];
  }

  std::size_t leaves_ = 0;
  std::vector<std::int64_t> tree_, added_;
};

}  // namespace fragless::core
