// Placed runs: the greedy layout's placed blocks, kept in (offset, end) order in runs of at
// most kRunEntries with their lifetimes as columns (Note [Placed runs]), and, for a large
// step of short-lived blocks, which of each run's blocks live in each of kTimeBuckets spans
// of the step (Note [Time buckets]), so a short-lived block tests only the words that may
// hold a block it meets.
// Invariant: the runs' extents, read run after run, are in (offset, end) order, each run
// non-empty and holding at most kRunEntries; a run's lifetimes are its extents' in the same
// order; when bucketed, bit i of a run's row for bucket b is set exactly when entry i's
// lifetime touches bucket b (bucket_mask), so every entry a lifetime meets is among the
// candidates its mask gives.
// Plain C++, no shared state; one layout order's use at a time.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/lifetime_columns.hpp"

namespace fragless::core {

class placed_runs {
public:
  struct extent {
    std::size_t offset_bytes, end_bytes;
    bool operator<(const extent& other) const noexcept {
      return offset_bytes != other.offset_bytes ? offset_bytes < other.offset_bytes : end_bytes < other.end_bytes;
    }
  };
  static constexpr std::size_t kRunEntries = 512;
  static constexpr std::size_t kRunWords = kRunEntries / 64;
  // Note [Time buckets]
  static constexpr std::size_t kTimeBuckets = 64;
  struct run {
    std::vector<extent> extents;  // in (offset, end) order
    lifetime_columns lifetimes;   // the same order (Note [Lifetime columns])
    // Note [Time buckets]: kRunWords words per bucket, bucket after bucket; empty when the
    // runs are not bucketed.
    std::vector<std::uint64_t> bucket_rows;
    run(std::size_t capacity, bool bucketed);
  };

  // For at most `blocks` blocks whose lifetimes lie in phases [0, phases): a smaller step's
  // one run holds no more than it needs; `bucketed`: keep the time buckets (Note [Time
  // buckets]; the caller decides where they pay).
  placed_runs(std::size_t blocks, std::size_t phases, bool bucketed);

  const std::vector<run>& runs() const noexcept { return runs_; }
  bool bucketed() const noexcept { return bucketed_; }

  // Note [Time buckets]: the buckets a lifetime [begin, end) + [0, second_end) touches, as
  // bits; a lifetime it meets (lifetimes_meet) shares one of them. Only when bucketed.
  std::uint64_t bucket_mask(std::uint32_t begin, std::uint32_t end, std::uint32_t second_end) const noexcept;
  // The entries of `each` (a bit per entry, kRunWords words) that touch a bucket of `mask`.
  static void candidates(const run& each, std::uint64_t mask, std::uint64_t (&words)[kRunWords]) noexcept;

  // Inserts after every entry not above `entry` (an upper bound), as one array would.
  // Inline: the greedy layout's inner loop calls it once per block.
  void insert(const extent& entry, std::uint32_t begin, std::uint32_t end, std::uint32_t second_end) {
    // The first run whose last entry is above `entry`, else the last run (no run is empty
    // once it has been made: the first is made for the first entry).
    std::size_t index = 0;
    if (runs_.empty()) {
      runs_.emplace_back(run_capacity_, bucketed_);
    } else {
      const auto above = std::partition_point(runs_.begin(), runs_.end(),
                                              [&](const run& each) { return !(entry < each.extents.back()); });
      index = above == runs_.end() ? runs_.size() - 1 : static_cast<std::size_t>(above - runs_.begin());
    }
    if (runs_[index].extents.size() == kRunEntries) {
      run upper(kRunEntries, bucketed_);
      run& full = runs_[index];
      upper.extents.assign(full.extents.begin() + kRunEntries / 2, full.extents.end());
      full.extents.resize(kRunEntries / 2);
      full.lifetimes.move_tail_to(kRunEntries / 2, upper.lifetimes);
      if (bucketed_) split_rows(full, upper);
      runs_.insert(runs_.begin() + static_cast<std::ptrdiff_t>(index) + 1, std::move(upper));
      if (!(entry < runs_[index].extents.back())) ++index;
    }
    run& target = runs_[index];
    const auto at = std::upper_bound(target.extents.begin(), target.extents.end(), entry);
    const auto position = static_cast<std::size_t>(at - target.extents.begin());
    if (bucketed_) insert_rows(target, position, bucket_mask(begin, end, second_end));
    target.lifetimes.insert(position, begin, end, second_end);
    target.extents.insert(at, entry);
  }

private:
  std::size_t bucket_of(std::size_t phase) const noexcept;
  // Note [Time buckets]: a full run's upper half's words to `upper`; the rows of an entry
  // inserted at `position` with buckets `mask`.
  static void split_rows(run& lower, run& upper) noexcept;
  static void insert_rows(run& target, std::size_t position, std::uint64_t mask) noexcept;

  std::size_t run_capacity_;
  std::size_t phases_;
  bool bucketed_;
  std::vector<run> runs_;
};

}  // namespace fragless::core
