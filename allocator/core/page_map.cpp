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

std::size_t page_map::mapped_neighbours(std::size_t index) const noexcept {
  std::size_t count = 0;
  if (index > 0 && mapped_.contains(index - 1)) ++count;
  if (index + 1 < pages_.size() && mapped_.contains(index + 1)) ++count;
  return count;
}

std::size_t page_map::unmapped_pages(std::uintptr_t address, std::size_t size_bytes,
                                    std::size_t limit) const noexcept {
  const std::size_t first = first_page(address);
  const std::size_t end = end_page(address, size_bytes);
  return std::min(limit, end - first - mapped_.count_in(first, end));
}

void page_map::set_mapped(std::size_t first, std::size_t count, backend::physical_handle handle) {
  assert(count > 0 && first + count <= pages_.size());
  for (std::size_t index = first; index < first + count; ++index) {
    page_state& target = pages_[index];
    assert(!mapped_.contains(index));
    mapped_.insert(index);
    target.handle = handle;
    target.head_offset = static_cast<std::uint32_t>(index - first);
    target.chunk_pages = index == first ? static_cast<std::uint32_t>(count) : 0;
    // A new page joins 0, 1 or 2 neighbouring runs: +1, 0 or -1 runs.
    mapped_run_count_ = mapped_run_count_ + 1 - mapped_neighbours(index);
    if (live_bytes(index) == 0) {
      cached_free_.insert(index);
      freed_this_epoch_.insert(index);
    }
  }
}

backend::physical_handle page_map::set_unmapped(std::size_t head) {
  assert(mapped_.contains(head) && pages_[head].head_offset == 0);
  const std::size_t count = pages_[head].chunk_pages;
  for (std::size_t index = head; index < head + count; ++index) {
    page_state& target = pages_[index];
    assert(mapped_.contains(index) && live_bytes(index) == 0);
    mapped_.erase(index);
    target.head_offset = 0;
    target.chunk_pages = 0;
    mapped_run_count_ = mapped_run_count_ + mapped_neighbours(index) - 1;
    cached_free_.erase(index);
  }
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
