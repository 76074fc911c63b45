// Placed runs: the greedy layout's placed blocks, kept in (offset, end) order in runs of at
// most kRunEntries with their lifetimes as columns (Note [Placed runs]), and, for a step
// large enough, which of each run's blocks live in each of kTimeBuckets spans of the step
// (Note [Time buckets]), so a short-lived block tests only the words that may hold a block
// it meets.
// Invariant: the runs' extents, read run after run, are in (offset, end) order, each run
// non-empty and holding at most kRunEntries; a run's lifetimes are its extents' in the same
// order; when bucketed, bit i of a run's row for bucket b is set exactly when entry i's
// lifetime touches bucket b (bucket_mask), so every entry a lifetime meets is among the
// candidates its mask gives.
// Plain C++, no shared state; one layout order's use at a time.
#pragma once

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
  static constexpr std::size_t kBucketedBlocks = 2048;
  struct run {
    std::vector<extent> extents;  // in (offset, end) order
    lifetime_columns lifetimes;   // the same order (Note [Lifetime columns])
    // Note [Time buckets]: kRunWords words per bucket, bucket after bucket; empty when the
    // runs are not bucketed.
    std::vector<std::uint64_t> bucket_rows;
    run(std::size_t capacity, bool bucketed);
  };

  // For at most `blocks` blocks whose lifetimes lie in phases [0, phases): a smaller step's
  // one run holds no more than it needs; a step of at least kBucketedBlocks is bucketed.
  placed_runs(std::size_t blocks, std::size_t phases);

  const std::vector<run>& runs() const noexcept { return runs_; }
  bool bucketed() const noexcept { return bucketed_; }

  // Note [Time buckets]: the buckets a lifetime [begin, end) + [0, second_end) touches, as
  // bits; a lifetime it meets (lifetimes_meet) shares one of them. Only when bucketed.
  std::uint64_t bucket_mask(std::uint32_t begin, std::uint32_t end, std::uint32_t second_end) const noexcept;
  // The entries of `each` (a bit per entry, kRunWords words) that touch a bucket of `mask`.
  static void candidates(const run& each, std::uint64_t mask, std::uint64_t (&words)[kRunWords]) noexcept;

  // Inserts after every entry not above `entry` (an upper bound), as one array would.
  void insert(const extent& entry, std::uint32_t begin, std::uint32_t end, std::uint32_t second_end);

private:
  std::size_t bucket_of(std::size_t phase) const noexcept;

  std::size_t run_capacity_;
  std::size_t phases_;
  bool bucketed_;
  std::vector<run> runs_;
};

}  // namespace fragless::core
