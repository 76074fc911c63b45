// Per-page live-byte counts and mapping state (see page_map.hpp).
#include "core/page_map.hpp"

#include <algorithm>
#include <cassert>

namespace fragless::core {

page_map::page_map(std::uintptr_t base, std::size_t page_count, std::size_t page_bytes)
    : base_(base), page_bytes_(page_bytes), pages_(page_count), cached_free_(page_count) {}

template <typename F>
void page_map::for_each_overlap(std::uintptr_t address, std::size_t size_bytes, F&& f) {
  const std::uintptr_t end = address + size_bytes;
  for (std::size_t index = first_page(address); index < end_page(address, size_bytes); ++index) {
    const std::uintptr_t page_start = page_address(index);
    const std::uintptr_t overlap_start = std::max(page_start, address);
    const std::uintptr_t overlap_end = std::min(page_start + page_bytes_, end);
    f(index, static_cast<std::uint32_t>(overlap_end - overlap_start));
  }
}

std::size_t page_map::mapped_neighbours(std::size_t index) const noexcept {
  std::size_t count = 0;
  if (index > 0 && pages_[index - 1].mapped) ++count;
  if (index + 1 < pages_.size() && pages_[index + 1].mapped) ++count;
  return count;
}

std::size_t page_map::unmapped_pages(std::uintptr_t address, std::size_t size_bytes,
                                    std::size_t limit) const noexcept {
  std::size_t count = 0;
  const std::size_t end = end_page(address, size_bytes);
  for (std::size_t index = first_page(address); index < end && count < limit; ++index)
    if (!pages_[index].mapped) ++count;
  return count;
}

void page_map::set_mapped(std::size_t first, std::size_t count, backend::physical_handle handle) {
  assert(count > 0 && first + count <= pages_.size());
  for (std::size_t index = first; index < first + count; ++index) {
    page_state& target = pages_[index];
    assert(!target.mapped);
    target.mapped = true;
    target.handle = handle;
    target.head_offset = static_cast<std::uint32_t>(index - first);
    target.chunk_pages = index == first ? static_cast<std::uint32_t>(count) : 0;
    ++mapped_count_;
    // A new page joins 0, 1 or 2 neighbouring runs: +1, 0 or -1 runs.
    mapped_run_count_ = mapped_run_count_ + 1 - mapped_neighbours(index);
    if (target.live_bytes == 0) {
      cached_free_.insert(index);
      target.free_since_epoch = epoch_;
    }
  }
}

backend::physical_handle page_map::set_unmapped(std::size_t head) {
  assert(pages_[head].mapped && pages_[head].head_offset == 0);
  const std::size_t count = pages_[head].chunk_pages;
  for (std::size_t index = head; index < head + count; ++index) {
    page_state& target = pages_[index];
    assert(target.mapped && target.live_bytes == 0);
    target.mapped = false;
    target.head_offset = 0;
    target.chunk_pages = 0;
    --mapped_count_;
    mapped_run_count_ = mapped_run_count_ + mapped_neighbours(index) - 1;
    cached_free_.erase(index);
  }
  return pages_[head].handle;
}

bool page_map::chunk_free(std::size_t head) const noexcept {
  const std::size_t count = pages_[head].chunk_pages;
  for (std::size_t index = head; index < head + count; ++index)
    if (pages_[index].live_bytes != 0) return false;
  return true;
}

void page_map::add_live(std::uintptr_t address, std::size_t size_bytes) {
  for_each_overlap(address, size_bytes, [this](std::size_t index, std::uint32_t bytes) {
    page_state& target = pages_[index];
    assert(target.mapped);
    if (target.live_bytes == 0) cached_free_.erase(index);
    target.live_bytes += bytes;
  });
  live_total_bytes_ += size_bytes;
  live_high_water_bytes_ = std::max(live_high_water_bytes_, live_total_bytes_);
  touched_high_water_pages_ = std::max(touched_high_water_pages_, mapped_count_ - cached_free_.size());
}

void page_map::remove_live(std::uintptr_t address, std::size_t size_bytes) {
  for_each_overlap(address, size_bytes, [this](std::size_t index, std::uint32_t bytes) {
    page_state& target = pages_[index];
    assert(target.live_bytes >= bytes);
    target.live_bytes -= bytes;
    if (target.live_bytes == 0 && target.mapped) {
      cached_free_.insert(index);
      target.free_since_epoch = epoch_;
    }
  });
  live_total_bytes_ -= size_bytes;
}

}  // namespace fragless::core
