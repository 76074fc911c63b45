// Page bookkeeping for the VMM large pool: for every physical-page-sized slot of the
// device's virtual range, how many live bytes touch it, whether physical memory is mapped
// there, which physical chunk (one handle over one or more consecutive pages, mapped and
// unmapped only whole: Note [Physical chunks] in vmm_pool_pages.cpp) it belongs to, and
// since which compaction epoch a cached page has been free (Note [Compaction]).
// Invariants: live_bytes(page) <= page_bytes; a page with live bytes is mapped; a page
// one block covers whole is in full_ and counts nothing in live_bytes_ (Note [Whole pages]);
// cached_free = { mapped pages with zero live bytes }, a subset of mapped (a bitmap that
// range scans read a word of 64 pages at a time);
// mapped_run_count = number of maximal runs of consecutive mapped pages; the mapped pages
// are partitioned into chunks, each a run [head, head + chunk_pages(head)) whose pages all
// name the same head and handle.
// Not thread-safe: the owner holds its device lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/backend.hpp"
#include "core/page_set.hpp"

namespace fragless::core {

class page_map {
 public:
  page_map() = default;
  page_map(std::uintptr_t base, std::size_t page_count, std::size_t page_bytes);

  std::size_t page_bytes() const noexcept { return page_bytes_; }
  std::size_t page_count() const noexcept { return pages_.size(); }
  std::uintptr_t page_address(std::size_t page) const noexcept { return base_ + page * page_bytes_; }
  // First and one-past-last page touched by [address, address + size_bytes).
  std::size_t first_page(std::uintptr_t address) const noexcept { return (address - base_) / page_bytes_; }
  std::size_t end_page(std::uintptr_t address, std::size_t size_bytes) const noexcept {
    return (address + size_bytes - base_ + page_bytes_ - 1) / page_bytes_;
  }

  bool is_mapped(std::size_t page) const noexcept { return mapped_.contains(page); }
  // Unmapped pages touched by [address, address + size_bytes), at most `limit` (a word of
  // 64 pages at a time).
  std::size_t unmapped_pages(std::uintptr_t address, std::size_t size_bytes, std::size_t limit) const noexcept;
  // The lowest unmapped page of [first, end), or end.
  std::size_t first_unmapped(std::size_t first, std::size_t end) const noexcept { return mapped_.first_absent(first, end); }
  // The lowest mapped page of [first, end), or end.
  std::size_t first_mapped(std::size_t first, std::size_t end) const noexcept { return mapped_.first_member(first, end); }
  // The end of the run of unmapped pages that starts at unmapped `page`, at most `end`
  // (above the highest mapped page the run reaches `end` at once).
  std::size_t unmapped_run_end(std::size_t page, std::size_t end) const noexcept {
    const std::size_t top = mapped_.highest_below(page_set::npos);
    if (top == page_set::npos || page > top) return end;
    std::size_t run_end = page + 1;
    while (run_end < end && !mapped_.contains(run_end)) ++run_end;
    return run_end;
  }
  std::size_t live_bytes(std::size_t page) const noexcept {
    return full_.contains(page) ? page_bytes_ : live_bytes_[page];  // Note [Whole pages]
  }
  backend::physical_handle handle(std::size_t page) const noexcept { return pages_[page].handle; }

  // Records `handle` mapped over pages [first, first + count) as one chunk.
  // Precondition: those pages are unmapped.
  void set_mapped(std::size_t first, std::size_t count, backend::physical_handle handle);
  void set_mapped(std::size_t page, backend::physical_handle handle) { set_mapped(page, 1, handle); }
  // Unmaps the chunk starting at `head`; returns its handle. Precondition: `head` is a
  // chunk's first page and no page of the chunk has live bytes.
  backend::physical_handle set_unmapped(std::size_t head);
  // The first page and the page count of the chunk holding a mapped page.
  std::size_t chunk_head(std::size_t page) const noexcept { return page - pages_[page].head_offset; }
  std::size_t chunk_pages(std::size_t head) const noexcept { return pages_[head].chunk_pages; }
  // No page of the chunk at `head` has live bytes.
  bool chunk_free(std::size_t head) const noexcept;
  // Cached free pages in chunks that still have a live page: pages that can be neither
  // moved nor released (Note [Pinned pages] in vmm_pool_growth.cpp). One pass over the
  // cached free pages, a chunk at a time.
  std::size_t pinned_free_pages() const noexcept;

  // Counts [address, address + size_bytes) as live on every page it touches.
  // Precondition: those pages are mapped.
  void add_live(std::uintptr_t address, std::size_t size_bytes);
  // Reverse of add_live; pages left with no live bytes join the cached-free set.
  void remove_live(std::uintptr_t address, std::size_t size_bytes);

  const page_set& cached_free_pages() const noexcept { return cached_free_; }
  // Note [Compaction]: the epoch advances with every automatic pass; a cached page records
  // the epoch in which it last became free.
  std::uint32_t epoch() const noexcept { return epoch_; }
  void advance_epoch() noexcept;
  std::uint32_t free_since_epoch(std::size_t page) const noexcept {
    return freed_this_epoch_.contains(page) ? epoch_ : free_since_epoch_[page];  // Note [Whole pages]
  }
  std::size_t mapped_count() const noexcept { return mapped_.size(); }
  // Maximal runs of consecutive mapped pages (what the stats call device segments).
  std::size_t mapped_run_count() const noexcept { return mapped_run_count_; }
  std::size_t mapped_bytes() const noexcept { return mapped_.size() * page_bytes_; }
  // Highest live bytes and highest count of pages live blocks touch, at any one time.
  std::size_t live_high_water_bytes() const noexcept { return live_high_water_bytes_; }
  std::size_t touched_high_water_pages() const noexcept { return touched_high_water_pages_; }

 private:
  // The chunk of a mapped page (whether it is mapped is mapped_). Live bytes and free
  // epochs are arrays of their own, beside two bitmaps that stand in for them where a
  // block's whole pages change in bulk (Note [Whole pages]).
  struct page_state {
    std::uint32_t head_offset = 0;  // mapped: page index - its chunk's first page
    std::uint32_t chunk_pages = 0;  // on a chunk's first page: its page count
    backend::physical_handle handle = 0;
  };
  // One page a block covers in part (add_live / remove_live).
  void add_live_page(std::size_t index, std::uint32_t bytes) noexcept;
  void remove_live_page(std::size_t index, std::uint32_t bytes) noexcept;
  // The pages [address, address + size_bytes) touches, [first, end), and those of them it
  // covers whole, [whole_first, whole_end) (empty when none; then whole_first <= end).
  struct page_span {
    std::size_t first = 0, whole_first = 0, whole_end = 0, end = 0;
  };
  page_span span_of(std::uintptr_t address, std::size_t size_bytes) const noexcept;
  // f(page, bytes covered) for every page of `span` the range covers in part (at most two).
  template <typename F>
  void for_each_partial_page(std::uintptr_t address, std::size_t size_bytes, const page_span& span, F&& f);

  std::uintptr_t base_ = 0;
  std::size_t page_bytes_ = 0;
  std::vector<page_state> pages_;
  std::vector<std::uint32_t> live_bytes_;  // 0 on a page of full_
  std::vector<std::uint32_t> free_since_epoch_;  // stale on a page of freed_this_epoch_
  page_set full_;  // pages one live block covers whole: page_bytes_ live bytes each
  page_set freed_this_epoch_;  // pages that became cached free since the epoch advanced
  page_set cached_free_;
  page_set mapped_;  // the mapped pages: range scans read a word of 64 at a time
  std::size_t mapped_run_count_ = 0;
  std::uint32_t epoch_ = 0;
  std::size_t live_total_bytes_ = 0;
  std::size_t live_high_water_bytes_ = 0;
  std::size_t touched_high_water_pages_ = 0;
  // How many of the pages beside [first, end), the one before and the one after, are mapped.
  std::size_t mapped_neighbours(std::size_t first, std::size_t end) const noexcept;
};

}  // namespace fragless::core
