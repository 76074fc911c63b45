// Best-fit, address-ordered free index with coalescing (see free_index.hpp).
#include "core/free_index.hpp"

#include <algorithm>
#include <cassert>

#include "core/tree_nodes.hpp"

namespace fragless::core {

// Note [Index nodes]: a range that grows or shrinks keeps its tree nodes -- extracted,
// re-keyed and put back -- so merging a free into a neighbour and carving a block out of
// a range allocate no host memory. A range that goes (two merged into one) leaves its
// nodes as spares (up to 64 per tree, tree_nodes.hpp), and a range that comes (a carve that
// leaves two pieces, a free with no neighbour) takes them: a loop that splits and merges as
// often allocates none either. An insert takes both of a new range's nodes before it
// changes either tree, so one that runs out of host memory changes nothing (a range in one
// tree and not the other was a crash later); a whole range carved and inserted again
// keeps a spare node of each first (keep_spare_nodes), so its insert cannot fail.
void free_index::erase(std::map<std::uintptr_t, entry>::iterator at) {
  if (!holds_pieces(at->second.segment_id)) spare_size_nodes_.keep(by_size_.extract({at->second.size_bytes, at->first}));
  free_bytes_ -= at->second.size_bytes;
  spare_address_nodes_.keep(by_address_.extract(at));
}

// Note [Index nodes]: the size tree's node first, so that a failure changes nothing.
void free_index::add(free_range&& range) {
  const bool pieces = holds_pieces(range.segment_id);
  const std::pair<std::size_t, std::uintptr_t> size_key{range.size_bytes, range.address};
  auto size_node = pieces ? decltype(by_size_)::node_type{} : node_holding(spare_size_nodes_, size_key);
  insert_reusing(by_address_, spare_address_nodes_, range.address,
                 entry{range.size_bytes, range.segment_id, std::move(range.streams)});
  if (!pieces) by_size_.insert(std::move(size_node));
  free_bytes_ += size_key.first;
}

void free_index::resize(std::map<std::uintptr_t, entry>::iterator at, std::uintptr_t address,
                        std::size_t size_bytes) {
  if (!holds_pieces(at->second.segment_id)) {
    auto by_size = by_size_.extract({at->second.size_bytes, at->first});
    by_size.value() = {size_bytes, address};
    by_size_.insert(std::move(by_size));
  }
  free_bytes_ = free_bytes_ - at->second.size_bytes + size_bytes;
  at->second.size_bytes = size_bytes;
  if (at->first != address) {
    // The range stays between the same neighbours: it goes back where it was, before the
    // next one (a hinted insert, no search).
    const auto next = std::next(at);
    auto by_address = by_address_.extract(at);
    by_address.key() = address;
    by_address_.insert(next, std::move(by_address));
  }
}

void free_index::insert(free_range range) {
  auto next = by_address_.lower_bound(range.address);
  assert(next == by_address_.end() || next->first >= range.address + range.size_bytes);
  // Note [Piece segments]: pieces merge only where they remember the same streams.
  const bool pieces = holds_pieces(range.segment_id);
  auto merges_with = [&](const entry& neighbour) {
    return neighbour.segment_id == range.segment_id && (!pieces || neighbour.streams == range.streams);
  };
  const bool next_merges =
      next != by_address_.end() && next->first == range.address + range.size_bytes && merges_with(next->second);
  if (next != by_address_.begin()) {
    auto previous = std::prev(next);
    assert(previous->first + previous->second.size_bytes <= range.address);
    if (previous->first + previous->second.size_bytes == range.address && merges_with(previous->second)) {
      // Grows the previous range in place (Note [Index nodes]).
      std::size_t size_bytes = previous->second.size_bytes + range.size_bytes;
      previous->second.streams.merge(range.streams);
      if (next_merges) {
        size_bytes += next->second.size_bytes;
        previous->second.streams.merge(next->second.streams);
        erase(next);
      }
      resize(previous, previous->first, size_bytes);
      return;
    }
  }
  if (next_merges) {  // the next range grows downwards (Note [Index nodes])
    next->second.streams.merge(range.streams);
    resize(next, range.address, range.size_bytes + next->second.size_bytes);
    return;
  }
  add(std::move(range));
}

namespace {

free_range copied(const free_range_ref& range) {
  return free_range{range.address, range.size_bytes, range.segment_id, *range.streams};
}

}  // namespace

std::optional<free_range_ref> free_index::best_fit_ref(std::size_t size_bytes) const {
  auto at = by_size_.lower_bound({size_bytes, 0});
  if (at == by_size_.end()) return std::nullopt;
  const entry& found = by_address_.at(at->second);
  return free_range_ref{at->second, found.size_bytes, found.segment_id, &found.streams};
}

std::optional<free_range_ref> free_index::best_fit_ref_in(std::size_t size_bytes, std::uint64_t segment_id) const {
  for (auto at = by_size_.lower_bound({size_bytes, 0}); at != by_size_.end(); ++at) {
    const entry& found = by_address_.at(at->second);
    if (found.segment_id == segment_id) return free_range_ref{at->second, found.size_bytes, found.segment_id, &found.streams};
  }
  return std::nullopt;
}

std::optional<free_range> free_index::best_fit(std::size_t size_bytes) const {
  const std::optional<free_range_ref> found = best_fit_ref(size_bytes);
  if (!found) return std::nullopt;
  return copied(*found);
}

std::optional<free_range> free_index::highest() const {
  if (by_address_.empty()) return std::nullopt;
  const auto& [address, found] = *by_address_.rbegin();
  return free_range{address, found.size_bytes, found.segment_id, found.streams};
}

void free_index::carve(std::uintptr_t address, std::size_t size_bytes) {
  auto at = by_address_.upper_bound(address);
  assert(at != by_address_.begin());
  carve_from(std::prev(at), address, size_bytes);
}

void free_index::carve_from(std::map<std::uintptr_t, entry>::iterator at, std::uintptr_t address,
                            std::size_t size_bytes) {
  const std::uintptr_t whole_address = at->first;
  const std::uintptr_t whole_end = whole_address + at->second.size_bytes;
  const std::uintptr_t end = address + size_bytes;
  assert(whole_address <= address && end <= whole_end);
  // Note [Index nodes]: the range's nodes hold the piece before, else the piece after.
  if (whole_address < address) {
    if (end < whole_end)
      add(free_range{end, whole_end - end, at->second.segment_id, at->second.streams});
    resize(at, whole_address, address - whole_address);
  } else if (end < whole_end) {
    resize(at, end, whole_end - end);
  } else {
    erase(at);
  }
}

void free_index::carve_across(std::uintptr_t address, std::size_t size_bytes) {
  const std::uintptr_t end = address + size_bytes;
  auto at = by_address_.upper_bound(address);
  assert(at != by_address_.begin());
  --at;
  while (address < end) {
    assert(at != by_address_.end() && at->first <= address);
    const std::uintptr_t range_end = at->first + at->second.size_bytes;
    assert(address < range_end);
    const std::uintptr_t piece_end = std::min(end, range_end);
    // The next piece starts where this range ends: its node is the next one, which carving
    // this range leaves alone (only the last piece can leave a part after the block).
    const auto next = std::next(at);
    carve_from(at, address, piece_end - address);
    address = piece_end;
    at = next;
  }
}

bool free_index::streams_across(std::uintptr_t address, std::size_t size_bytes, std::uint64_t segment_id,
                                stream_set* streams) const {
  streams->clear();
  const std::uintptr_t end = address + size_bytes;
  auto at = by_address_.upper_bound(address);
  if (at == by_address_.begin()) return false;
  --at;
  for (std::uintptr_t covered = address; covered < end; ++at) {
    if (at == by_address_.end() || at->first > covered || at->first + at->second.size_bytes <= covered ||
        at->second.segment_id != segment_id)
      return false;
    streams->merge(at->second.streams);
    covered = at->first + at->second.size_bytes;
  }
  return true;
}

std::optional<free_range_ref> free_index::containing_ref(std::uintptr_t address) const {
  auto at = by_address_.upper_bound(address);
  if (at == by_address_.begin()) return std::nullopt;
  --at;
  if (address >= at->first + at->second.size_bytes) return std::nullopt;
  return free_range_ref{at->first, at->second.size_bytes, at->second.segment_id, &at->second.streams};
}

std::optional<free_range> free_index::containing(std::uintptr_t address) const {
  const std::optional<free_range_ref> found = containing_ref(address);
  if (!found) return std::nullopt;
  return copied(*found);
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
