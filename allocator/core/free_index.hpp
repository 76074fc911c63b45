// The large pool's free index: free address ranges, best fit by size, address ordered.
// Invariants: ranges are disjoint and 512 B aligned; two ranges that touch and belong to
// the same segment are always merged (coalescing), so a free range is maximal -- except in
// a piece segment (Note [Piece segments]), where two touching ranges may differ in their
// streams; the size index holds exactly the address index's ranges outside piece segments.
// Not thread-safe: the owner (large_pool) holds its device lock around every call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "core/stream_set.hpp"
#include "core/tree_nodes.hpp"

namespace fragless::core {

struct free_range {
  std::uintptr_t address = 0;
  std::size_t size_bytes = 0;
  std::uint64_t segment_id = 0;  // ranges of different segments never merge
  stream_set streams;            // streams whose queued work may still touch the range
};

// A free range as the index holds it, its streams not copied (a set of more than four
// streams lives on the heap): for the hot paths that read a range and then carve from it.
// Valid until the index next changes.
struct free_range_ref {
  std::uintptr_t address = 0;
  std::size_t size_bytes = 0;
  std::uint64_t segment_id = 0;
  const stream_set* streams = nullptr;  // never null in a range the index returned
};

// Note [Piece segments]
// A segment whose id has kPieceSegmentFlag set keeps apart the free ranges that remember
// different streams: a range inserted there merges only with touching neighbours of the
// same stream set (each stream keeps the later tick, as in any merge), so each piece holds
// the streams of the frees that made it; and pieces are left out of best fit (they are
// found by address only). Where every free comes from one stream, pieces merge as ranges
// elsewhere do: a planned block then spans one piece, not one per block freed under it
// (kept apart always, corpus sharded-data-parallel seed 133's planned passes took 20 %
// more host time, a planned block carving and uniting many pieces). A loop plan's range is
// one (Note [Streams per piece] in vmm_pool_plans.cpp): a planned block waits only for the
// streams whose frees touched its own bytes, where a merged range made it wait for every
// stream that freed anywhere in the range.
inline constexpr std::uint64_t kPieceSegmentFlag = std::uint64_t{1} << 63;
constexpr bool holds_pieces(std::uint64_t segment_id) noexcept { return (segment_id & kPieceSegmentFlag) != 0; }

class free_index {
 public:
  // Adds a free range, merging it with free neighbours of the same segment (in a piece
  // segment, of the same streams). Precondition: overlaps no free range.
  void insert(free_range range);

  // Best fit: the smallest range of at least `size_bytes`, lowest address among equals.
  std::optional<free_range> best_fit(std::size_t size_bytes) const;
  // best_fit as a reference (free_range_ref), and the same among the ranges of one
  // segment only.
  std::optional<free_range_ref> best_fit_ref(std::size_t size_bytes) const;
  std::optional<free_range_ref> best_fit_ref_in(std::size_t size_bytes, std::uint64_t segment_id) const;
  // The range with the highest address, if any.
  std::optional<free_range> highest() const;
  // Removes [address, address + size_bytes) from the free range containing it; the parts
  // before and after stay free. Precondition: a single free range contains it.
  void carve(std::uintptr_t address, std::size_t size_bytes);
  // Note [Index nodes]: a node kept for each tree (std::bad_alloc: nothing changed), so that
  // carving a whole range and inserting it again allocates nothing.
  void keep_spare_nodes() {
    spare_address_nodes_.keep_at_least_one();
    spare_size_nodes_.keep_at_least_one();
  }
  // The same across touching ranges (the pieces of a piece segment). Precondition: free
  // ranges cover it without a gap.
  void carve_across(std::uintptr_t address, std::size_t size_bytes);
  // Note [Piece segments]: the streams of every range of `segment_id` over [address,
  // address + size_bytes) into *streams (cleared first); false when such ranges do not
  // cover it without a gap. May throw std::bad_alloc (a set of more than four streams).
  bool streams_across(std::uintptr_t address, std::size_t size_bytes, std::uint64_t segment_id,
                      stream_set* streams) const;

  // The free range containing `address`, if any.
  std::optional<free_range> containing(std::uintptr_t address) const;
  // The same as a reference (free_range_ref).
  std::optional<free_range_ref> containing_ref(std::uintptr_t address) const;

  std::size_t range_count() const noexcept { return by_address_.size(); }
  std::size_t free_bytes() const noexcept { return free_bytes_; }
  std::size_t largest_bytes() const noexcept;

  // Visits every range in address order: f(const free_range&).
  template <typename F>
  void for_each(F&& f) const {
    for (const auto& [address, value] : by_address_)
      f(free_range{address, value.size_bytes, value.segment_id, value.streams});
  }
  // Visits every free extent in address order: f(address, size_bytes), copying no stream
  // set. Touching pieces of a piece segment are one extent, as the merged range they used
  // to be: a snapshot shows one free block there, and its stats (inactive splits, the
  // largest free block) are PyTorch's, not the pieces'.
  template <typename F>
  void for_each_extent(F&& f) const {
    std::uintptr_t start = 0, end = 0;
    std::uint64_t segment_id = 0;
    for (const auto& [address, value] : by_address_) {
      if (end != start && address == end && value.segment_id == segment_id && holds_pieces(segment_id)) {
        end += value.size_bytes;
        continue;
      }
      if (end != start) f(start, end - start);
      start = address;
      end = address + value.size_bytes;
      segment_id = value.segment_id;
    }
    if (end != start) f(start, end - start);
  }
  // Clears every range's stream set (after a device synchronization).
  void forget_streams() noexcept;
  // Replaces `from` by `to` in every range's stream set (Note [Retired streams]).
  // Returns whether any range named `from`. May allocate host memory.
  bool rename_stream(stream_id from, stream_id to);

 private:
  struct entry {
    std::size_t size_bytes;
    std::uint64_t segment_id;
    stream_set streams;
  };
  void erase(std::map<std::uintptr_t, entry>::iterator at);
  void add(free_range&& range);
  // carve() of the range at `at`, which contains [address, address + size_bytes).
  void carve_from(std::map<std::uintptr_t, entry>::iterator at, std::uintptr_t address, std::size_t size_bytes);
  // Makes the range at `at` [address, address + size_bytes), keeping its nodes.
  void resize(std::map<std::uintptr_t, entry>::iterator at, std::uintptr_t address, std::size_t size_bytes);

  std::map<std::uintptr_t, entry> by_address_;
  std::set<std::pair<std::size_t, std::uintptr_t>> by_size_;
  // Note [Index nodes]: the nodes of the range erased last, for the next range added.
  spare_nodes<std::map<std::uintptr_t, entry>> spare_address_nodes_;  // Note [Index nodes]
  spare_nodes<std::set<std::pair<std::size_t, std::uintptr_t>>> spare_size_nodes_;
  std::size_t free_bytes_ = 0;
};

}  // namespace fragless::core
