// Lifetime columns (Note [Lifetime columns]): meeting_bits gives, 64 entries at a time,
// exactly the entries lifetimes_meet says meet the lifetime asked about -- for lifetimes
// that wrap or not, phases above 2^31, every count of entries around the vector width and
// the 32- and 64-entry groups, and after inserts, appends, removals, sets, copies and
// moves of a tail; the four-lane test and the eight-lane one (Note [Wide lifetime tests])
// each, whatever the entries past the count hold.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <vector>

#include "core/lifetime_columns.hpp"
#include "core/step_layout.hpp"

using fragless::core::lifetime_columns;
using fragless::core::lifetimes_meet;

namespace {

struct lifetime {
  std::uint32_t begin, end, second_end;
};

// A lifetime within a step of `phases` phases starting at `base`: [begin, end), or wrapping
// past the step's end as [begin, base + phases) + [0, second_end) (second_end <= begin).
lifetime random_lifetime(std::mt19937_64& random, std::uint32_t base, std::uint32_t phases) {
  std::uniform_int_distribution<std::uint32_t> phase(0, phases - 1);
  const std::uint32_t begin = base + phase(random);
  if (begin > 0 && random() % 4 == 0) {
    const std::uint32_t second_end = 1 + static_cast<std::uint32_t>(random() % begin);
    return {begin, base + phases, second_end};
  }
  const std::uint32_t end = begin + 1 + static_cast<std::uint32_t>(random() % (base + phases - begin));
  return {begin, end, 0};
}

// Every word's bits against lifetimes_meet, entry by entry.
void check_every_word(const lifetime_columns& columns, const std::vector<lifetime>& entries, const lifetime& query) {
  REQUIRE(columns.size() == entries.size());
  for (std::size_t word = 0; word * 64 < entries.size(); ++word) {
    const std::uint64_t bits = columns.meeting_bits(word, query.begin, query.end, query.second_end);
    for (std::size_t bit = 0; bit < 64; ++bit) {
      const std::size_t entry = word * 64 + bit;
      const bool expected =
          entry < entries.size() && lifetimes_meet(query.begin, query.end, query.second_end, entries[entry].begin,
                                                   entries[entry].end, entries[entry].second_end);
      INFO("entry " << entry << " of " << entries.size());
      CHECK(((bits >> bit) & 1) == (expected ? 1u : 0u));
    }
  }
}

}  // namespace

TEST_CASE("meeting bits are lifetimes_meet, entry for entry, at every count", "[lifetime_columns]") {
  std::mt19937_64 random(20261129);
  // Low phases, and phases above 2^31 (an unsigned order a signed compare would get wrong).
  for (const std::uint32_t base : {std::uint32_t{0}, std::uint32_t{0x80000000u} - 40, std::uint32_t{0xF0000000u}}) {
    for (const std::size_t count : {0, 1, 3, 4, 5, 31, 32, 33, 63, 64, 65, 100, 128, 129, 200}) {
      const std::uint32_t phases = 1 + static_cast<std::uint32_t>(random() % 300);
      lifetime_columns columns(count);
      std::vector<lifetime> entries;
      for (std::size_t each = 0; each < count; ++each) {
        const lifetime added = random_lifetime(random, base, phases);
        const std::size_t position = entries.empty() ? 0 : random() % (entries.size() + 1);
        columns.insert(position, added.begin, added.end, added.second_end);
        entries.insert(entries.begin() + static_cast<std::ptrdiff_t>(position), added);
      }
      for (int query = 0; query < 20; ++query) check_every_word(columns, entries, random_lifetime(random, base, phases));
    }
  }
}

TEST_CASE("the four-lane and the eight-lane tests are lifetimes_meet, whatever lies past the count",
          "[lifetime_columns]") {
  // meeting_bits takes the eight-lane test where the processor has AVX2: each is checked
  // here on its own, the wide one wherever it can run.
  std::vector<lifetime_columns::meeting_bits_function> tests{&lifetime_columns::narrow_meeting_bits};
  if (lifetime_columns::kWideMeetingBits != nullptr) tests.push_back(lifetime_columns::kWideMeetingBits);
  INFO("tests checked: " << tests.size());
  std::mt19937_64 random(20261202);
  for (const std::uint32_t base : {std::uint32_t{0}, std::uint32_t{0xF0000000u}}) {
    for (std::size_t count = 0; count <= 64; ++count) {
      const std::uint32_t phases = 1 + static_cast<std::uint32_t>(random() % 200);
      // Entries past the count hold random phases: no bit may come of them.
      std::vector<std::uint32_t> begins(count + lifetime_columns::kPaddingEntries),
          ends(count + lifetime_columns::kPaddingEntries), second_ends(count + lifetime_columns::kPaddingEntries);
      std::vector<lifetime> entries;
      for (std::size_t each = 0; each < begins.size(); ++each) {
        const lifetime value = random_lifetime(random, base, phases);
        begins[each] = value.begin;
        ends[each] = value.end;
        second_ends[each] = value.second_end;
        if (each < count) entries.push_back(value);
      }
      for (int query_index = 0; query_index < 10; ++query_index) {
        const lifetime query = random_lifetime(random, base, phases);
        std::uint64_t expected = 0;
        for (std::size_t each = 0; each < count; ++each)
          if (lifetimes_meet(query.begin, query.end, query.second_end, entries[each].begin, entries[each].end,
                             entries[each].second_end))
            expected |= std::uint64_t{1} << each;
        for (std::size_t test = 0; test < tests.size(); ++test) {
          INFO("test " << test << " (0: four lanes, 1: eight), count " << count);
          CHECK(tests[test](begins.data(), ends.data(), second_ends.data(), count, query.begin, query.end,
                            query.second_end) == expected);
        }
      }
    }
  }
}

TEST_CASE("appends, removals, sets and copies keep the columns the list they mirror", "[lifetime_columns]") {
  std::mt19937_64 random(7);
  const std::uint32_t phases = 97;
  lifetime_columns columns(150);
  std::vector<lifetime> entries;
  for (int operation = 0; operation < 2000; ++operation) {
    const lifetime value = random_lifetime(random, 0, phases);
    switch (random() % 5) {
      case 0:
        if (entries.size() < columns.capacity()) {
          columns.push_back(value.begin, value.end, value.second_end);
          entries.push_back(value);
        }
        break;
      case 1:
        if (!entries.empty()) {
          columns.pop_back();
          entries.pop_back();
        }
        break;
      case 2:
        if (!entries.empty()) {
          const std::size_t position = random() % entries.size();
          columns.set(position, value.begin, value.end, value.second_end);
          entries[position] = value;
        }
        break;
      case 3:
        if (!entries.empty()) {
          const std::size_t from = random() % entries.size(), to = random() % entries.size();
          columns.copy(from, to);
          entries[to] = entries[from];
        }
        break;
      default: {
        // A tail moved out (as a full run of the greedy layout splits, Note [Placed runs])
        // holds those entries in order; moved back, the columns are whole again.
        const std::size_t from = entries.empty() ? 0 : random() % (entries.size() + 1);
        lifetime_columns tail(columns.capacity());
        columns.move_tail_to(from, tail);
        check_every_word(columns, std::vector<lifetime>(entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(from)),
                         random_lifetime(random, 0, phases));
        check_every_word(tail, std::vector<lifetime>(entries.begin() + static_cast<std::ptrdiff_t>(from), entries.end()),
                         random_lifetime(random, 0, phases));
        tail.move_tail_to(0, columns);
        CHECK(tail.size() == 0);
        break;
      }
    }
    if (operation % 50 == 0) check_every_word(columns, entries, random_lifetime(random, 0, phases));
  }
  check_every_word(columns, entries, random_lifetime(random, 0, phases));
}
