// Placed runs: the greedy layout's placed blocks in (offset, end) order, in runs, with the
// time buckets of a large step (Note [Placed runs], Note [Time buckets]).
// Invariant: as placed_runs.hpp -- the runs in order, each non-empty and at most
// kRunEntries long, and each bucket row's bits those of the entries touching the bucket.
#include "core/placed_runs.hpp"

#include <algorithm>
#include <bit>
#include <iterator>

namespace fragless::core {

// Note [Placed runs]
// The greedy layout keeps its placed blocks in (offset, end) order, so that the blocks a
// new one meets come out sorted (lay_out_in in step_layout.cpp). Kept in one array, each
// insertion moved half of it: a sixth of a 19,000-block step's layout was that memmove
// (corpus rlhf-ppo seed 842, `perf`). So they are kept in runs of at most kRunEntries, in
// order: an insertion moves only the entries of its run after it, and a full run splits in
// two. The visiting order, and so every offset, is the same.

// Note [Time buckets]
// Each block placed is tested against every block placed before it, 64 at a time (Note
// [Lifetime columns]), and on the largest steps that test is most of the layout: a
// whole-pass step of corpus rlhf-ppo seed 842 (19,243 blocks, laid out on the allocating
// thread) spent about half its layout in it. Such steps are made of short-lived blocks --
// there, three in four live less than 1/256 of the step -- so most tests fail. So a step of
// at least 2,048 blocks, three in four of them living at most 1/16 of it (lay_out_in), is
// cut into kTimeBuckets equal spans of its phases, and each run keeps, per bucket, a bit
// for each of its entries whose lifetime touches the bucket (a lifetime's first segment
// counts its first phase even when empty, as lifetimes_meet does: every pair it says meet
// shares a bucket). A block whose lifetime touches few buckets (kFilterBuckets in
// step_layout.cpp) ORs those rows and tests only the 64-entry words with a candidate; the
// test itself is unchanged, so the blocks met, their order and every offset are the same.
// Keeping the rows costs a one-bit shift of every row from the entry inserted on, and a
// split moves the upper half's words: on steps of 500-2,000 blocks, or of long-lived ones,
// that cost more than the tests it spared (up to 1.15x their layout time, bucketed from
// 513 blocks or where half the blocks live at most a quarter of the step), hence the rule.
// Measured with `fragless-bench layout` (one thread a layout): that step 590 -> 428 ms
// (medians of three alternated runs); seeds 1-20 of seven families, the fastest of three
// alternated runs per step, `rlhf-ppo` 0.81x, `model-swap` 0.84x, the others 0.97-1.04x;
// every offsets digest the same.

namespace {

// Bits lo..hi (inclusive, lo <= hi < 64).
std::uint64_t bit_range(std::size_t lo, std::size_t hi) noexcept {
  return (~std::uint64_t{0} >> (63 - hi)) & (~std::uint64_t{0} << lo);
}

}  // namespace

placed_runs::run::run(std::size_t capacity, bool bucketed) : lifetimes(capacity) {
  extents.reserve(capacity);
  if (bucketed) bucket_rows.assign(kTimeBuckets * kRunWords, 0);
}

placed_runs::placed_runs(std::size_t blocks, std::size_t phases, bool bucketed)
    : run_capacity_(std::min(blocks, kRunEntries)), phases_(std::max<std::size_t>(phases, 1)), bucketed_(bucketed) {}

std::size_t placed_runs::bucket_of(std::size_t phase) const noexcept {
  return std::min(kTimeBuckets - 1, phase * kTimeBuckets / phases_);
}

std::uint64_t placed_runs::bucket_mask(std::uint32_t begin, std::uint32_t end, std::uint32_t second_end) const noexcept {
  // At least the phase `begin`: last >= begin, so its bucket is never below begin's.
  const std::size_t last = std::max<std::size_t>(end, std::size_t{begin} + 1) - 1;
  std::uint64_t mask = bit_range(bucket_of(begin), bucket_of(last));
  if (second_end > 0) mask |= bit_range(0, bucket_of(second_end - 1));
  return mask;
}

void placed_runs::candidates(const run& each, std::uint64_t mask, std::uint64_t (&words)[kRunWords]) noexcept {
  std::fill(std::begin(words), std::end(words), std::uint64_t{0});
  for (; mask != 0; mask &= mask - 1) {
    const std::uint64_t* row = &each.bucket_rows[static_cast<std::size_t>(std::countr_zero(mask)) * kRunWords];
    for (std::size_t word = 0; word < kRunWords; ++word) words[word] |= row[word];
  }
}

void placed_runs::split_rows(run& lower, run& upper) noexcept {
  // Note [Time buckets]: the upper half's words move down.
  for (std::size_t bucket = 0; bucket < kTimeBuckets; ++bucket) {
    std::uint64_t* from = &lower.bucket_rows[bucket * kRunWords];
    std::uint64_t* to = &upper.bucket_rows[bucket * kRunWords];
    for (std::size_t word = 0; word < kRunWords / 2; ++word) {
      to[word] = from[kRunWords / 2 + word];
      from[kRunWords / 2 + word] = 0;
    }
  }
}

void placed_runs::insert_rows(run& target, std::size_t position, std::uint64_t mask) noexcept {
  // Note [Time buckets]: every row's bits from `position` on move up one (the run has room:
  // a full one split above), and the entry's own buckets get its bit.
  const std::size_t first_word = position / 64, words_after = (target.extents.size() + 64) / 64;
  const std::uint64_t below = position % 64 == 0 ? 0 : ~std::uint64_t{0} >> (64 - position % 64);
  for (std::size_t bucket = 0; bucket < kTimeBuckets; ++bucket) {
    std::uint64_t* row = &target.bucket_rows[bucket * kRunWords];
    for (std::size_t word = words_after - 1; word > first_word; --word) row[word] = (row[word] << 1) | (row[word - 1] >> 63);
    row[first_word] = (row[first_word] & below) | ((row[first_word] & ~below) << 1);
  }
  for (; mask != 0; mask &= mask - 1)
    target.bucket_rows[static_cast<std::size_t>(std::countr_zero(mask)) * kRunWords + first_word] |= std::uint64_t{1}
                                                                                                    << (position % 64);
}

}  // namespace fragless::core
