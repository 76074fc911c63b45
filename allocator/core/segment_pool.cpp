// The large pool in cudaMalloc mode (see segment_pool.hpp): PyTorch-like segments
// (Note [Segment sizes]), the max split size rule (Note [Max split size]), and releasing
// whole free segments, the one form of compaction this mode has.
// Invariant: a block lies inside one live segment; only whole free segments are released.
// Not thread-safe: the device cache holds the device lock around every call.
#include "core/segment_pool.hpp"

#include "core/segment_events.hpp"
#include "core/size_classes.hpp"

namespace fragless::core {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

}  // namespace

// Note [Segment sizes]
// cudaMalloc mode obtains segments as PyTorch does, with the two sizes configurable
// (small_segment_bytes, large_segment_bytes; defaults 2 MiB and 20 MiB, PyTorch's
// kSmallBuffer and kLargeBuffer): a request of at most half a small segment gets a small
// segment, one below half a large segment gets a large segment, anything else a segment
// of its own size rounded to 2 MiB. In VMM mode they do not apply: memory grows one
// physical page at a time and slabs are sized per class (Note [Size classes]).

// Note [Max split size]
// max_split_bytes (PyTorch's max_split_size) in cudaMalloc mode: a cached free range of at
// least that size is never split for a smaller request (it stays whole for the next large
// one, and such a request gets a new segment instead); a request of at least that size
// takes a free range only if the range exceeds it by less than a large segment (PyTorch's
// kLargeBuffer slack), and then takes the whole range so an oversize range is never split.
// In VMM mode free ranges are address space, not memory: splitting one strands no
// physical page (cached pages move, Note [Page cache]), so the option only sets the
// oversize threshold of the stats there.

// Note [Whole free segments]
// The bytes cached in this mode are those of the segments no block uses -- the only memory
// a release can give back. The device cache asks for them on every large allocation and
// free (Note [Compaction]: whether an automatic pass is due), so they are counted as the
// free index changes, not by a walk over the segments (one index lookup each, a cost that
// grew with the segment count: about a fifth of the samples of the property test's
// cudaMalloc case). A segment joins the count when a release leaves one free range over
// all of it, and leaves it when a range that covers it whole is carved from, or when it is
// released.

// Note [Segment sizes]
std::size_t segment_pool::segment_size_for(std::size_t size_bytes) const noexcept {
  if (size_bytes <= settings_.conf.small_segment_bytes / 2) return settings_.conf.small_segment_bytes;
  if (size_bytes < settings_.conf.large_segment_bytes / 2) return settings_.conf.large_segment_bytes;
  return round_up(size_bytes, 2 * kMiB);
}

// Note [Max split size]
std::optional<free_range> segment_pool::segment_fit(std::size_t size_bytes) const {
  std::optional<free_range> range = index_.best_fit(size_bytes);
  if (!range || settings_.conf.max_split_bytes == unlimited_bytes) return range;
  // Best fit is the smallest fitting range: if it is too large, every other one is too.
  if (size_bytes < settings_.conf.max_split_bytes && range->size_bytes >= settings_.conf.max_split_bytes) return std::nullopt;
  if (size_bytes >= settings_.conf.max_split_bytes && range->size_bytes - size_bytes >= settings_.conf.large_segment_bytes) return std::nullopt;
  return range;
}

backend::status segment_pool::allocate_segment(std::size_t size_bytes, stream_id stream, std::uintptr_t* address,
                                             std::size_t* placed_bytes) {
  std::optional<free_range> range = segment_fit(size_bytes);
  if (range && wait_forbidden(range->streams, stream)) range.reset();  // a fresh segment instead
  if (!range) {
    const std::size_t segment_bytes = segment_size_for(size_bytes);
    if (segment_bytes_ + segment_bytes > reserved_limit_bytes_) return backend::status::out_of_memory;
    void* base = nullptr;
    backend::status result = backend_.malloc_segment(device_, segment_bytes, &base);
    if (result != backend::status::ok) return result;
    ++counters_.device_alloc;
    const auto base_address = reinterpret_cast<std::uintptr_t>(base);
    try {
      segments_.emplace(base_address, segment_bytes);
      index_.insert(free_range{base_address, segment_bytes, base_address, {}});
      whole_free_bytes_ += segment_bytes;  // Note [Whole free segments]
    } catch (...) {
      segments_.erase(base_address);
      backend_.free_segment(device_, base);
      ++counters_.device_free;
      return backend::status::error;
    }
    segment_bytes_ += segment_bytes;
    notify_segment_event(device_, segment_event_kind::alloc, base_address, segment_bytes);
    range = free_range{base_address, segment_bytes, base_address, {}};
  }
  backend::status result = order_after_streams(range->streams, stream);
  if (result != backend::status::ok) return result;
  // Note [Max split size]: an oversize block takes its whole range, never splitting it.
  const std::size_t take_bytes = size_bytes >= settings_.conf.max_split_bytes ? range->size_bytes : size_bytes;
  const bool whole = covers_segment(range->address, range->size_bytes, range->segment_id);
  index_.carve(range->address, take_bytes);
  if (whole) whole_free_bytes_ -= range->size_bytes;  // Note [Whole free segments]
  *address = range->address;
  if (placed_bytes != nullptr) *placed_bytes = take_bytes;
  return backend::status::ok;
}

segment_pool::~segment_pool() {
  // Teardown: give back whatever is left; live blocks are the program's leak.
  for (const auto& [base, size] : segments_) backend_.free_segment(device_, reinterpret_cast<void*>(base));
}

backend::status segment_pool::allocate(std::size_t size_bytes, stream_id stream, std::uintptr_t* address,
                                       std::size_t* placed_bytes) noexcept {
  try {
    if (placed_bytes != nullptr) *placed_bytes = size_bytes;
    return allocate_segment(size_bytes, stream, address, placed_bytes);
  } catch (...) {  // std::bad_alloc from the index: host memory, not device memory
    return backend::status::error;
  }
}

bool segment_pool::release(std::uintptr_t address, std::size_t size_bytes, const stream_set& streams) noexcept {
  auto segment = std::prev(segments_.upper_bound(address));
  try {
    // free_index::insert changes nothing when it throws (Note [Index nodes]).
    index_.insert(free_range{address, size_bytes, segment->first, freed_now(streams)});
  } catch (...) {
    return false;  // only std::bad_alloc: the caller keeps the block (Note [Pending without host memory])
  }
  // Note [Whole free segments]: the range now holding the block may cover its segment.
  if (const std::optional<free_range_ref> merged = index_.containing_ref(address);
      merged && covers_segment(merged->address, merged->size_bytes, merged->segment_id))
    whole_free_bytes_ += segment->second;
  return true;
}

bool segment_pool::covers_segment(std::uintptr_t address, std::size_t size_bytes,
                                  std::uintptr_t segment_id) const noexcept {
  const auto segment = segments_.find(segment_id);
  return segment != segments_.end() && segment->first == address && segment->second == size_bytes;
}

std::vector<reserved_region> segment_pool::reserved_regions() const {
  std::vector<reserved_region> regions;
  for (const auto& [base, size] : segments_) regions.push_back({base, size});
  return regions;
}

// Note [Compaction]: in cudaMalloc mode a pass releases whole free idle segments only; the
// stats say page compaction is off (page_compaction = 0).
compaction_outcome segment_pool::compact(const compaction_pass& pass) noexcept {
  compaction_outcome outcome;
  std::size_t cached = cached_free_bytes();
  for (auto at = segments_.begin(); at != segments_.end() && cached > pass.bytes_to_keep;) {
    const auto [base, size] = *at;
    auto range = index_.containing(base);
    if (!range || range->address != base || range->size_bytes != size ||
        !make_range_idle(base) ||
        backend_.free_segment(device_, reinterpret_cast<void*>(base)) != backend::status::ok) {
      ++at;
      continue;
    }
    ++counters_.device_free;
    notify_segment_event(device_, segment_event_kind::free, base, size);
    index_.carve(base, size);
    segment_bytes_ -= size;
    whole_free_bytes_ -= size;  // Note [Whole free segments]
    outcome.released_bytes += size;
    cached -= size;
    at = segments_.erase(at);
  }
  return outcome;
}

// Note [IPC sharing]: a block's one piece is its whole segment (handle 0).
std::vector<large_pool::shared_piece> segment_pool::shared_pieces(std::uintptr_t address, std::size_t bytes) const {
  std::vector<shared_piece> pieces;
  if (bytes == 0) return pieces;
  const std::uintptr_t end = address + bytes;
  auto segment = segments_.upper_bound(address);
  if (segment == segments_.begin()) return pieces;
  --segment;
  if (end > segment->first + segment->second) return pieces;
  pieces.push_back(shared_piece{segment->first, segment->second, 0});
  return pieces;
}

}  // namespace fragless::core
