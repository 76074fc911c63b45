// The VMM pool's unmaps not yet made (Note [Dormant mappings] in vmm_pool_dormant.cpp): where
// a chunk moved away from, its old address range may still map its physical handle on the
// device. The pool counts those pages unmapped; this table remembers, for each such
// dormant range, which handle it maps and where that handle is mapped now, so the range is
// unmapped before anything else is mapped over it, or becomes the chunk's mapping again.
// Invariants: dormant ranges are disjoint; every page of one names its slot and no other
// page does; a handle has at most one dormant range (handle_slots_ finds it), except an
// orphan's (its handle released while the range stayed mapped), which no handle finds and
// which can only be unmapped; `active_head` is npos unless the handle is mapped in the range.
// Not thread-safe: the owner holds its device lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "backend/backend.hpp"
#include "core/page_set.hpp"

namespace fragless::core {

class dormant_mappings {
 public:
  static constexpr std::size_t npos = SIZE_MAX;
  struct mapping {
    std::size_t head = 0;   // first page of the dormant range
    std::size_t pages = 0;  // its length: the chunk's
    backend::physical_handle handle = 0;
    std::size_t active_head = npos;  // where the chunk is mapped in the range now, if it is
    bool orphaned = false;           // the handle was released (its value may come again)
  };

  dormant_mappings() = default;
  explicit dormant_mappings(std::size_t page_count);

  bool empty() const noexcept { return slot_count_ == 0; }
  std::size_t size() const noexcept { return slot_count_; }
  // The dormant range starting exactly at `page`, or null.
  const mapping* starting_at(std::size_t page) const noexcept {
    const std::uint32_t slot = slot_of_page_[page];
    return slot != 0 && slots_[slot - 1].head == page ? &slots_[slot - 1] : nullptr;
  }
  // The dormant range of a handle, or null (an orphan's is found by its pages only).
  const mapping* of_handle(backend::physical_handle handle) const noexcept;
  // A dormant range overlapping pages [first, end), or null: a word of 64 pages at a time.
  const mapping* first_overlapping(std::size_t first, std::size_t end) const noexcept {
    if (slot_count_ == 0) return nullptr;
    const std::size_t page = pages_.first_member(first, end);
    return page == end ? nullptr : &slots_[slot_of_page_[page] - 1];
  }
  // Records pages [head, head + pages), unmapped to the pool, as `handle`'s dormant range;
  // the chunk is mapped at `active_head` (npos until it is). False, with nothing recorded,
  // when host memory ran out. Precondition: the handle has no dormant range and no page of
  // the range is dormant.
  bool add(std::size_t head, std::size_t pages, backend::physical_handle handle, std::size_t active_head) noexcept;
  // Forgets the dormant range starting at `head` (it was unmapped).
  void remove(std::size_t head) noexcept;
  // The handle's chunk is mapped at `active_head` now.
  void set_active_head(backend::physical_handle handle, std::size_t active_head) noexcept;
  // The handle leaves the pool's range (released, or mapped elsewhere) while its dormant
  // range stays mapped: the range becomes an orphan, found by its pages only.
  void orphan(backend::physical_handle handle) noexcept;
  // An orphan's range, or null (a walk over the table: for compaction passes).
  const mapping* first_orphan() const noexcept;
  // The chunk dormant at `head` is mapped there again and leaves the range it was mapped
  // at dormant instead, of the same length: the slot moves, nothing is allocated.
  // Precondition: starting_at(head) is not an orphan, and its active range is not dormant.
  void swap_with_active(std::size_t head) noexcept;

 private:
  void mark_pages(std::size_t head, std::size_t pages, std::uint32_t slot) noexcept;

  std::vector<mapping> slots_;                 // slot s + 1 is slots_[s]
  std::vector<std::uint32_t> free_slots_;      // indices + 1 of unused entries of slots_
  std::vector<std::uint32_t> slot_of_page_;    // 0: not dormant
  page_set pages_;                             // the dormant pages
  std::unordered_map<backend::physical_handle, std::uint32_t> handle_slots_;
  std::size_t slot_count_ = 0;                 // dormant ranges recorded
};

}  // namespace fragless::core
