// Best-fit, address-ordered free index with coalescing (see free_index.hpp).
#include "core/free_index.hpp"

#include <cassert>

namespace fragless::core {

void free_index::erase(std::map<std::uintptr_t, entry>::iterator at) {
  by_size_.erase({at->second.size_bytes, at->first});
  free_bytes_ -= at->second.size_bytes;
  by_address_.erase(at);
}

void free_index::add(const free_range& range) {
  by_address_.emplace(range.address, entry{range.size_bytes, range.segment_id, range.streams});
  by_size_.emplace(range.size_bytes, range.address);
  free_bytes_ += range.size_bytes;
}

free_range free_index::insert(free_range range) {
  auto next = by_address_.lower_bound(range.address);
  assert(next == by_address_.end() || next->first >= range.address + range.size_bytes);
  if (next != by_address_.begin()) {
    auto previous = std::prev(next);
    assert(previous->first + previous->second.size_bytes <= range.address);
    if (previous->first + previous->second.size_bytes == range.address &&
        previous->second.segment_id == range.segment_id) {
      range.address = previous->first;
      range.size_bytes += previous->second.size_bytes;
      range.streams.merge(previous->second.streams);
      erase(previous);
    }
  }
  if (next != by_address_.end() && next->first == range.address + range.size_bytes &&
      next->second.segment_id == range.segment_id) {
    range.size_bytes += next->second.size_bytes;
    range.streams.merge(next->second.streams);
    erase(next);
  }
  add(range);
  return range;
}

std::optional<free_range> free_index::best_fit(std::size_t size_bytes) const {
  auto at = by_size_.lower_bound({size_bytes, 0});
  if (at == by_size_.end()) return std::nullopt;
  const entry& found = by_address_.at(at->second);
  return free_range{at->second, found.size_bytes, found.segment_id, found.streams};
}

std::optional<free_range> free_index::best_fit_in(std::size_t size_bytes, std::uint64_t segment_id) const {
  for (auto at = by_size_.lower_bound({size_bytes, 0}); at != by_size_.end(); ++at) {
    const entry& found = by_address_.at(at->second);
    if (found.segment_id == segment_id) return free_range{at->second, found.size_bytes, found.segment_id, found.streams};
  }
  return std::nullopt;
}

std::optional<free_range> free_index::highest() const {
  if (by_address_.empty()) return std::nullopt;
  const auto& [address, found] = *by_address_.rbegin();
  return free_range{address, found.size_bytes, found.segment_id, found.streams};
}

void free_index::carve(std::uintptr_t address, std::size_t size_bytes) {
  auto at = by_address_.upper_bound(address);
  assert(at != by_address_.begin());
  --at;
  free_range whole{at->first, at->second.size_bytes, at->second.segment_id, at->second.streams};
  assert(whole.address <= address && address + size_bytes <= whole.address + whole.size_bytes);
  erase(at);
  if (whole.address < address)
    add(free_range{whole.address, address - whole.address, whole.segment_id, whole.streams});
  const std::uintptr_t end = address + size_bytes;
  const std::uintptr_t whole_end = whole.address + whole.size_bytes;
  if (end < whole_end) add(free_range{end, whole_end - end, whole.segment_id, whole.streams});
}

std::optional<free_range> free_index::containing(std::uintptr_t address) const {
  auto at = by_address_.upper_bound(address);
  if (at == by_address_.begin()) return std::nullopt;
  --at;
  if (address >= at->first + at->second.size_bytes) return std::nullopt;
  return free_range{at->first, at->second.size_bytes, at->second.segment_id, at->second.streams};
}

std::size_t free_index::largest_bytes() const noexcept {
  return by_size_.empty() ? 0 : by_size_.rbegin()->first;
}

void free_index::forget_streams() noexcept {
  for (auto& [address, found] : by_address_) found.streams.clear();
}

bool free_index::rename_stream(stream_id from, stream_id to) {
  bool renamed = false;
  for (auto& [address, found] : by_address_) renamed |= found.streams.rename(from, to);
  return renamed;
}

}  // namespace fragless::core
