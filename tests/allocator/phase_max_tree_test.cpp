// The phase max tree (core/phase_max_tree.hpp) against a plain array: after every range
// addition its largest value is the array's, and so is its largest over a random range, on
// random phase counts (powers of two and not) and ranges, the values raised and lowered but
// never below zero, as the skyline search uses it (Note [Canonical turns]).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "core/phase_max_tree.hpp"

using fragless::core::phase_max_tree;

TEST_CASE("the phase max tree's largest value, of all and of a range, is the array's after every range addition", "[phase_max_tree]") {
  std::mt19937 random(7);
  for (const std::size_t phases : {1, 2, 3, 7, 8, 64, 100, 1000}) {
    INFO(phases << " phases");
    std::vector<std::size_t> values(phases);
    for (std::size_t& value : values) value = random() % 1000;
    phase_max_tree tree(values);
    CHECK(tree.most() == *std::max_element(values.begin(), values.end()));
    for (int step = 0; step < 2000; ++step) {
      std::size_t begin = random() % phases, end = random() % (phases + 1);
      if (begin > end) std::swap(begin, end);
      // Lower by at most the smallest value in the range, so that none goes below zero.
      std::int64_t amount = static_cast<std::int64_t>(random() % 500);
      if (random() % 2 == 0 && begin < end) {
        const auto least = *std::min_element(values.begin() + static_cast<std::ptrdiff_t>(begin),
                                             values.begin() + static_cast<std::ptrdiff_t>(end));
        amount = -std::min<std::int64_t>(amount, static_cast<std::int64_t>(least));
      }
      tree.add(begin, end, amount);
      for (std::size_t phase = begin; phase < end; ++phase)
        values[phase] = static_cast<std::size_t>(static_cast<std::int64_t>(values[phase]) + amount);
      REQUIRE(tree.most() == *std::max_element(values.begin(), values.end()));
      for (int query = 0; query < 4; ++query) {
        std::size_t from = random() % phases, to = random() % (phases + 1);
        if (from > to) std::swap(from, to);
        if (query == 0) to = std::min(phases, from + 1);  // a single phase
        const std::size_t expected =
            from == to ? 0
                       : *std::max_element(values.begin() + static_cast<std::ptrdiff_t>(from),
                                           values.begin() + static_cast<std::ptrdiff_t>(to));
        INFO("phases [" << from << ", " << to << ")");
        REQUIRE(tree.most_in(from, to) == expected);
      }
    }
  }
  CHECK(phase_max_tree().most() == 0);
  CHECK(phase_max_tree(std::vector<std::size_t>{}).most() == 0);
}
