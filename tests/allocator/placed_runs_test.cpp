// Placed runs (Note [Placed runs], Note [Time buckets]): after every insertion the runs,
// read in turn, are the entries one sorted array would hold (upper-bound insertion), each
// run non-empty and at most kRunEntries long, each run's lifetimes its entries'; a bucketed
// step's rows hold exactly the bits of the entries touching each bucket; and the candidates
// a lifetime's buckets give include every entry lifetimes_meet says it meets -- for
// lifetimes that wrap, that are empty, long and short, at the step's edges.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "core/placed_runs.hpp"
#include "core/step_layout.hpp"

using fragless::core::lifetimes_meet;
using fragless::core::placed_runs;

namespace {

struct entry {
  placed_runs::extent where;
  std::uint32_t begin, end, second_end;
};

// Mostly short lifetimes, some long, some wrapping past the step's end, some empty.
entry random_entry(std::mt19937_64& random, std::uint32_t phases) {
  const std::uint32_t begin = static_cast<std::uint32_t>(random() % phases);
  std::uint32_t end = begin, second_end = 0;
  switch (random() % 8) {
    case 0:  // wraps: [begin, phases) + [0, second_end)
      end = phases;
      second_end = begin == 0 ? 0 : 1 + static_cast<std::uint32_t>(random() % begin);
      break;
    case 1:  // long
      end = begin + 1 + static_cast<std::uint32_t>(random() % (phases - begin));
      break;
    case 2:  // empty, as a step's data may hold
      break;
    default:  // short
      end = std::min(phases, begin + 1 + static_cast<std::uint32_t>(random() % 40));
      break;
  }
  // Offsets from a small set, so that equal offsets and equal extents occur.
  const std::size_t offset = (random() % 4096) * 512, size = 512 * (1 + random() % 8);
  return {{offset, offset + size}, begin, end, second_end};
}

// The runs against the reference array: order, sizes, lifetimes (by meeting bits against
// queries), bucket rows, and candidates covering every entry met.
void check(const placed_runs& placed, const std::vector<entry>& reference, std::uint32_t phases,
           std::mt19937_64& random) {
  std::size_t at = 0;
  for (const placed_runs::run& run : placed.runs()) {
    REQUIRE(!run.extents.empty());
    REQUIRE(run.extents.size() <= placed_runs::kRunEntries);
    REQUIRE(run.lifetimes.size() == run.extents.size());
    for (std::size_t index = 0; index < run.extents.size(); ++index) {
      REQUIRE(at + index < reference.size());
      CHECK(run.extents[index].offset_bytes == reference[at + index].where.offset_bytes);
      CHECK(run.extents[index].end_bytes == reference[at + index].where.end_bytes);
    }
    if (placed.bucketed()) {
      REQUIRE(run.bucket_rows.size() == placed_runs::kTimeBuckets * placed_runs::kRunWords);
      for (std::size_t bucket = 0; bucket < placed_runs::kTimeBuckets; ++bucket)
        for (std::size_t word = 0; word < placed_runs::kRunWords; ++word) {
          std::uint64_t expected = 0;
          for (std::size_t bit = 0; bit < 64 && word * 64 + bit < run.extents.size(); ++bit) {
            const entry& each = reference[at + word * 64 + bit];
            if ((placed.bucket_mask(each.begin, each.end, each.second_end) >> bucket) & 1) expected |= std::uint64_t{1} << bit;
          }
          INFO("bucket " << bucket << " word " << word);
          CHECK(run.bucket_rows[bucket * placed_runs::kRunWords + word] == expected);
        }
    } else {
      CHECK(run.bucket_rows.empty());
    }
    for (int query_index = 0; query_index < 4; ++query_index) {
      const entry query = random_entry(random, phases);
      std::uint64_t candidates[placed_runs::kRunWords];
      if (placed.bucketed())
        placed_runs::candidates(run, placed.bucket_mask(query.begin, query.end, query.second_end), candidates);
      for (std::size_t word = 0; word * 64 < run.extents.size(); ++word) {
        std::uint64_t expected = 0;
        for (std::size_t bit = 0; bit < 64 && word * 64 + bit < run.extents.size(); ++bit) {
          const entry& each = reference[at + word * 64 + bit];
          if (lifetimes_meet(query.begin, query.end, query.second_end, each.begin, each.end, each.second_end))
            expected |= std::uint64_t{1} << bit;
        }
        CHECK(run.lifetimes.meeting_bits(word, query.begin, query.end, query.second_end) == expected);
        if (placed.bucketed()) CHECK((expected & ~candidates[word]) == 0);
      }
    }
    at += run.extents.size();
  }
  CHECK(at == reference.size());
}

void insert_and_check(std::size_t blocks, std::uint32_t phases, bool bucketed, std::uint64_t seed,
                      std::size_t check_every) {
  std::mt19937_64 random(seed);
  placed_runs placed(blocks, phases, bucketed);
  CHECK(placed.bucketed() == bucketed);
  std::vector<entry> reference;
  for (std::size_t count = 0; count < blocks; ++count) {
    const entry next = random_entry(random, phases);
    placed.insert(next.where, next.begin, next.end, next.second_end);
    const auto above = std::upper_bound(reference.begin(), reference.end(), next,
                                        [](const entry& a, const entry& b) { return a.where < b.where; });
    reference.insert(above, next);
    if (count % check_every == 0 || count + 1 == blocks) check(placed, reference, phases, random);
  }
}

}  // namespace

TEST_CASE("placed runs are one sorted array, split into runs", "[placed_runs]") {
  insert_and_check(3000, 3000, false, 7, 97);
}

TEST_CASE("a large step's time buckets hold their entries' bits through inserts and splits", "[placed_runs]") {
  insert_and_check(5000, 20000, true, 11, 251);
  insert_and_check(3000, 70, true, 13, 199);  // fewer phases than buckets: one phase a bucket or more
}

TEST_CASE("lifetimes that meet share a time bucket", "[placed_runs]") {
  std::mt19937_64 random(17);
  for (const std::uint32_t phases : {1u, 2u, 63u, 64u, 65u, 1000u, 38486u}) {
    const placed_runs placed(1000, phases, true);
    for (int pair = 0; pair < 20000; ++pair) {
      const entry a = random_entry(random, phases), b = random_entry(random, phases);
      if (!lifetimes_meet(a.begin, a.end, a.second_end, b.begin, b.end, b.second_end)) continue;
      INFO("phases " << phases << ": [" << a.begin << ", " << a.end << ") + " << a.second_end << " and [" << b.begin
                     << ", " << b.end << ") + " << b.second_end);
      CHECK((placed.bucket_mask(a.begin, a.end, a.second_end) & placed.bucket_mask(b.begin, b.end, b.second_end)) != 0);
    }
  }
}
