// Per-page live-byte counts and mapping state (see page_map.hpp).
#include "core/page_map.hpp"

#include <algorithm>
#include <cassert>

namespace fragless::core {

page_map::page_map(std::uintptr_t base, std::size_t page_count, std::size_t page_bytes)
    : base_(base),
      page_bytes_(page_bytes),
      pages_(page_count),
      live_bytes_(page_count, 0),
      free_since_epoch_(page_count, 0),
      full_(page_count),
      freed_this_epoch_(page_count),
      cached_free_(page_count),
      mapped_(page_count) {}

page_map::page_span page_map::span_of(std::uintptr_t address, std::size_t size_bytes) const noexcept {
  page_span span;
  span.first = first_page(address);
  span.end = end_page(address, size_bytes);
  span.whole_first = (address - base_ + page_bytes_ - 1) / page_bytes_;
  span.whole_end = std::max(span.whole_first, (address + size_bytes - base_) / page_bytes_);
  return span;
}

std::size_t page_map::mapped_neighbours(std::size_t first, std::size_t end) const noexcept {
  return (first > 0 && mapped_.contains(first - 1) ? 1 : 0) + (end < pages_.size() && mapped_.contains(end) ? 1 : 0);
}

std::size_t page_map::unmapped_pages(std::uintptr_t address, std::size_t size_bytes,
                                    std::size_t limit) const noexcept {
  const std::size_t first = first_page(address);
  const std::size_t end = end_page(address, size_bytes);
  return std::min(limit, end - first - mapped_.count_in(first, end));
}

// Note [Chunk bitmaps]
// A chunk's pages enter and leave the mapped and cached-free sets a word of 64 pages at a
// time, and the count of mapped runs changes once per chunk -- by one, less the runs on
// either side it joins or splits. Page by page, a chunk of a large block took a set
// insert, two neighbour tests and a branch for each of its pages: on corpus `huge-tensors`
// seeds making pages present was 36 % of the host time ns/op counts, recording the new
// chunk about 5 % of it (scripts/host_profile.py). Instructions inside the allocator's calls,
// layouts aside (scripts/count_instructions.py, 13 seeds of five families, every peak and
// call the same): 0.98x in all, `huge-tensors` 0.94-0.98x, one-page chunks
// (`kv-cache-eviction`) 1.00-1.01x; host time against PyTorch's replayed beside it (seeds
// 1-100 of four families, five repetitions, three alternated runs): first pass 2.06x ->
// 1.99x PyTorch's, second 1.32x -> 1.28x, the median pass unchanged (1.08x).
void page_map::set_mapped(std::size_t first, std::size_t count, backend::physical_handle handle) {
  const std::size_t end = first + count;
  assert(count > 0 && end <= pages_.size());
  assert(mapped_.count_in(first, end) == 0);
  for (std::size_t index = first; index < end; ++index) {
    page_state& target = pages_[index];
    target.handle = handle;
    target.head_offset = static_cast<std::uint32_t>(index - first);
    target.chunk_pages = index == first ? static_cast<std::uint32_t>(count) : 0;
  }
  // The new run joins 0, 1 or 2 neighbouring runs: +1, 0 or -1 runs.
  mapped_run_count_ = mapped_run_count_ + 1 - mapped_neighbours(first, end);
  mapped_.insert_range(first, end);
  // An unmapped page holds no live byte (a page with live bytes is mapped), so every page
  // of the chunk is a cached free page.
  assert(full_.count_in(first, end) == 0);
  assert(std::all_of(live_bytes_.begin() + static_cast<std::ptrdiff_t>(first),
                     live_bytes_.begin() + static_cast<std::ptrdiff_t>(end), [](std::uint32_t bytes) { return bytes == 0; }));
  cached_free_.insert_range(first, end);
  freed_this_epoch_.insert_range(first, end);
}

backend::physical_handle page_map::set_unmapped(std::size_t head) {
  assert(mapped_.contains(head) && pages_[head].head_offset == 0);
  const std::size_t end = head + pages_[head].chunk_pages;
  assert(mapped_.count_in(head, end) == end - head && cached_free_.count_in(head, end) == end - head);
  for (std::size_t index = head; index < end; ++index) {
    page_state& target = pages_[index];
    target.head_offset = 0;
    target.chunk_pages = 0;
  }
  mapped_.erase_range(head, end);
  cached_free_.erase_range(head, end);
  // The run it leaves splits into what is mapped on either side: -1, 0 or +1 runs.
  mapped_run_count_ = mapped_run_count_ + mapped_neighbours(head, end) - 1;
  return pages_[head].handle;
}

// A chunk's pages are all mapped, so they are all free when all are cached free pages.
bool page_map::chunk_free(std::size_t head) const noexcept {
  const std::size_t count = pages_[head].chunk_pages;
  return cached_free_.count_in(head, head + count) == count;
}

std::size_t page_map::pinned_free_pages() const noexcept {
  const std::size_t end = pages_.size();
  std::size_t pinned = 0;
  for (std::size_t page = cached_free_.first_member(0, end); page < end;) {
    const std::size_t head = chunk_head(page);
    const std::size_t chunk_end = head + pages_[head].chunk_pages;
    const std::size_t free_pages = cached_free_.count_in(head, chunk_end);
    if (free_pages != chunk_end - head) pinned += free_pages;
    page = cached_free_.first_member(chunk_end, end);
  }
  return pinned;
}

// Note [Whole pages]
// A page a block covers whole is touched by no other block: add_live finds it with no
// live bytes (a cached free page) and leaves it full; remove_live empties it. So a block's
// whole pages change in bulk, a word of 64 pages at a time in bitmaps -- full_ for the
// pages a block fills (their live bytes are the page's, not counted in live_bytes_),
// freed_this_epoch_ for the pages that became free since the epoch last advanced (their
// free epoch is the current one; advance_epoch() writes it into free_since_epoch_) -- and
// only its first and last page, which it may share, are counted one by one. (Page by
// page, a GiB block cost 512 steps on every allocation and free; that was two fifths of a
// steady huge-tensor pass. Filled in bulk into the per-page arrays, it was still a quarter
// of the instructions of a steady allocation and free on corpus huge-tensors seed 17.)

void page_map::advance_epoch() noexcept {
  freed_this_epoch_.take_members([this](std::size_t page) { free_since_epoch_[page] = epoch_; });
  ++epoch_;
}

void page_map::add_live_page(std::size_t index, std::uint32_t bytes) noexcept {
  assert(mapped_.contains(index) && !full_.contains(index));
  if (live_bytes_[index] == 0) cached_free_.erase(index);
  live_bytes_[index] += bytes;
}

void page_map::remove_live_page(std::size_t index, std::uint32_t bytes) noexcept {
  assert(live_bytes_[index] >= bytes);
  live_bytes_[index] -= bytes;
  if (live_bytes_[index] == 0 && mapped_.contains(index)) {
    cached_free_.insert(index);
    freed_this_epoch_.insert(index);
  }
}

template <typename F>
void page_map::for_each_partial_page(std::uintptr_t address, std::size_t size_bytes, const page_span& span, F&& f) {
  const auto overlap_bytes = [&](std::size_t index) {
    return static_cast<std::uint32_t>(std::min(page_address(index) + page_bytes_, address + size_bytes) -
                                      std::max(page_address(index), address));
  };
  for (std::size_t index = span.first; index < span.whole_first; ++index) f(index, overlap_bytes(index));
  for (std::size_t index = span.whole_end; index < span.end; ++index) f(index, overlap_bytes(index));
}

void page_map::add_live(std::uintptr_t address, std::size_t size_bytes) {
  const page_span span = span_of(address, size_bytes);
  for_each_partial_page(address, size_bytes, span,
                        [this](std::size_t index, std::uint32_t bytes) { add_live_page(index, bytes); });
  if (span.whole_first < span.whole_end) {  // Note [Whole pages]: cached free pages before, full ones now
    assert(full_.count_in(span.whole_first, span.whole_end) == 0);
    assert(std::all_of(live_bytes_.begin() + static_cast<std::ptrdiff_t>(span.whole_first),
                       live_bytes_.begin() + static_cast<std::ptrdiff_t>(span.whole_end),
                       [](std::uint32_t bytes) { return bytes == 0; }));
    page_set::move_range(cached_free_, full_, nullptr, span.whole_first, span.whole_end);
  }
  live_total_bytes_ += size_bytes;
  live_high_water_bytes_ = std::max(live_high_water_bytes_, live_total_bytes_);
  touched_high_water_pages_ = std::max(touched_high_water_pages_, mapped_.size() - cached_free_.size());
}

void page_map::remove_live(std::uintptr_t address, std::size_t size_bytes) {
  const page_span span = span_of(address, size_bytes);
  for_each_partial_page(address, size_bytes, span,
                        [this](std::size_t index, std::uint32_t bytes) { remove_live_page(index, bytes); });
  if (span.whole_first < span.whole_end) {  // Note [Whole pages]: full (so mapped) pages become cached free
    assert(full_.count_in(span.whole_first, span.whole_end) == span.whole_end - span.whole_first);
    page_set::move_range(full_, cached_free_, &freed_this_epoch_, span.whole_first, span.whole_end);
  }
  live_total_bytes_ -= size_bytes;
}

}  // namespace fragless::core
