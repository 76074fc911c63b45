// VMM pool: mappings outside the shared range -- dedicated mappings
// (Note [Dedicated mappings]) and stitched mappings (Note [Stitching]).
// Invariant: a mapping in dedicated_ is fully mapped (every handle at its place) and holds
// one block or none; a failed attempt leaves no mapping, no reserved range and no handle
// behind.
// Not thread-safe: the device cache holds the device lock around every call.
#include "core/vmm_pool.hpp"
#include "core/monotonic_clock.hpp"
#include "core/segment_events.hpp"
#include "core/size_classes.hpp"

namespace fragless::core {

// Note [Dedicated mappings]
// In VMM mode a request of at least dedicated_mapping_threshold_bytes whose memory is new
// (Note [Growth]: otherwise it goes to the shared range) and that no active loop plan
// expects (Note [Loop plans]: it goes to its planned place) gets an address range of its
// own, rounded up to whole pages and backed by one physical allocation mapped at once,
// instead of a place in the shared range: a very large tensor neither fragments the
// shared range's address space nor costs one map call per page. The block
// is the whole mapping (its size rounded to the page), so no other block ever shares it.
// When freed it becomes cached memory like a free page (Note [Release threshold]): it is
// reused in place by a request of the same rounded size (ordered after the streams that
// freed it, Note [Stream reuse]) and released by empty_cache/trim/OOM, or earlier by the
// release and garbage-collection thresholds once no stream can still touch it, or when
// reserved memory would otherwise pass its high-water mark (Note [Growth]). In
// cudaMalloc mode large requests get segments of their own anyway (Note [Segment sizes]),
// so the threshold does not apply there.

// Note [Stitching]
// A request that no free range of the shared address space can hold (address space
// fragmented or exhausted) gets a fresh virtual range of its own, rounded up to pages, and
// physical pages mapped into it one by one: free pages moved out of free ranges of the
// shared range first (only idle ones, Note [Page cache]), new ones only for the rest. The
// result is a stitched mapping, kept like a dedicated mapping (Note [Dedicated mappings]):
// one block; when freed it is reused whole by a request of the same rounded size, and a
// compaction pass unmaps it and releases its pages. Whenever the shared range has room the
// same happens without a fresh range: a block placed over unmapped pages takes idle free
// pages from elsewhere (page moves) before any new one is created.
// A failed stitch unmaps what it mapped, releases the handles it took and frees the range,
// so nothing half-mapped is ever handed out.

bool vmm_pool::reuse_mapping(std::size_t bytes, stream_id stream, std::uintptr_t* address,
                               backend::status* result) noexcept {
  for (auto& [base, mapping] : dedicated_) {
    if (!mapping.fits_exactly(bytes)) continue;
    if (wait_forbidden(mapping.streams, stream)) continue;
    try {
      *result = order_after_streams(mapping.streams, stream);
    } catch (...) {
      *result = backend::status::error;
    }
    if (*result != backend::status::ok) return true;
    mapping.in_use = true;
    mapping.streams = stream_set();
    dedicated_cached_bytes_ -= bytes;
    *address = base;
    return true;
  }
  return false;
}

// Note [Dedicated mappings]
backend::status vmm_pool::allocate_dedicated(std::size_t size_bytes, stream_id stream, std::uintptr_t* address,
                                               std::size_t* placed_bytes) {
  const std::size_t bytes = round_up(size_bytes, pages_.page_bytes());
  if (placed_bytes != nullptr) *placed_bytes = bytes;
  backend::status reused = backend::status::ok;
  if (reuse_mapping(bytes, stream, address, &reused)) return reused;
  make_room_for_growth(bytes);  // Note [Growth]
  if (reserved_bytes() + bytes > reserved_limit_bytes_) return backend::status::out_of_memory;
  std::uintptr_t base = 0;
  backend::status result = backend_.reserve_address_range(device_, bytes, &base);
  if (result != backend::status::ok) return result;
  backend::physical_handle handle = 0;
  result = backend_.create_physical(device_, bytes, &handle);
  if (result != backend::status::ok) {
    backend_.free_address_range(device_, base, bytes);
    return result;
  }
  ++counters_.device_alloc;
  const std::int64_t start = now_ns();
  result = backend_.map(device_, base, bytes, handle);
  counters_.map_ns += now_ns() - start;
  if (result == backend::status::ok) {
    ++counters_.map;
    try {
      dedicated_.emplace(base, dedicated_mapping{bytes, bytes, {handle}, false, true, {}, 0});
    } catch (...) {
      backend_.unmap(device_, base, bytes);
      ++counters_.unmap;
      result = backend::status::error;
    }
  }
  if (result != backend::status::ok) {
    release_handle(handle);
    backend_.free_address_range(device_, base, bytes);
    return result;
  }
  dedicated_bytes_ += bytes;
  note_growth();  // Note [Growth]
  notify_segment_event(device_, segment_event_kind::alloc, base, bytes);
  *address = base;
  return backend::status::ok;
}

// Note [Stitching]
backend::status vmm_pool::allocate_stitched(std::size_t size_bytes, stream_id stream, std::uintptr_t* address,
                                              std::size_t* placed_bytes) {
  const std::size_t page_bytes = pages_.page_bytes();
  const std::size_t bytes = round_up(size_bytes, page_bytes);
  if (placed_bytes != nullptr) *placed_bytes = bytes;
  backend::status result = backend::status::ok;
  if (reuse_mapping(bytes, stream, address, &result)) return result;
  std::vector<backend::physical_handle> handles;
  handles.reserve(bytes / page_bytes);  // may throw: before anything is reserved
  std::uintptr_t base = 0;
  result = backend_.reserve_address_range(device_, bytes, &base);
  if (result != backend::status::ok) return result;
  // Every page move orders nothing: take_page only moves pages no stream can still touch.
  for (std::size_t offset = 0; offset < bytes && result == backend::status::ok; offset += page_bytes) {
    backend::physical_handle handle = 0;
    result = take_page(0, 0, false, &handle);
    if (result != backend::status::ok) break;
    const std::int64_t start = now_ns();
    result = backend_.map_without_access(device_, base + offset, page_bytes, handle);  // Note [Access per run]
    counters_.map_ns += now_ns() - start;
    if (result != backend::status::ok) {
      release_handle(handle);
      break;
    }
    ++counters_.map;
    handles.push_back(handle);  // reserved above: cannot throw
    dedicated_bytes_ += page_bytes;  // counted at once: the next take_page checks the limit
    note_growth();                   // Note [Growth]
  }
  // Note [Access per run]: the whole stitch in one access change.
  bool granted = false;
  if (result == backend::status::ok) {
    const std::int64_t start = now_ns();
    result = backend_.set_access(device_, base, bytes);
    counters_.map_ns += now_ns() - start;
    granted = result == backend::status::ok;
  }
  if (result == backend::status::ok) {
    try {
      dedicated_.emplace(base, dedicated_mapping{bytes, bytes, handles, true, true, {}, 0});
    } catch (...) {
      result = backend::status::error;
    }
  }
  if (result != backend::status::ok) {
    // Undo, from the end: the pages taken are unmapped and released. A page whose unmap
    // fails (a second fault, or a capture underway: Note [Capture underway]) stops the undo;
    // the mapped prefix then stays as a cached stitched mapping -- counted, in the
    // snapshot, and released by a later pass -- and no block points into it.
    while (!handles.empty()) {
      const std::uintptr_t piece = base + (handles.size() - 1) * page_bytes;
      const std::int64_t start = now_ns();
      if (backend_.unmap(device_, piece, page_bytes) != backend::status::ok) break;
      counters_.unmap_ns += now_ns() - start;
      ++counters_.unmap;
      release_handle(handles.back());
      handles.pop_back();
      dedicated_bytes_ -= page_bytes;
    }
    if (handles.empty()) {
      backend_.free_address_range(device_, base, bytes);
      return result;
    }
    const std::size_t kept_bytes = handles.size() * page_bytes;
    try {
      auto kept = dedicated_.emplace(base, dedicated_mapping{kept_bytes, bytes, handles, true, false, {}, pages_.epoch()});
      kept.first->second.accessible = granted;  // without access it is never handed out
      dedicated_cached_bytes_ += kept_bytes;
      notify_segment_event(device_, segment_event_kind::alloc, base, kept_bytes);
    } catch (...) {
      // No host memory either: the prefix stays mapped and counted, outside the snapshot.
    }
    return result;
  }
  ++counters_.stitched_allocations;
  notify_segment_event(device_, segment_event_kind::alloc, base, bytes);
  *address = base;
  return backend::status::ok;
}

bool vmm_pool::release_dedicated(std::uintptr_t base) noexcept {
  auto at = dedicated_.find(base);
  if (at == dedicated_.end() || at->second.in_use) return false;
  dedicated_mapping& mapping = at->second;
  const std::size_t range_bytes = mapping.range_bytes;
  const std::size_t piece_bytes = mapping.bytes / mapping.handles.size();
  // Unmap from the end, one handle's piece at a time, so a failure leaves a mapped prefix.
  while (!mapping.handles.empty()) {
    const std::uintptr_t piece = base + (mapping.handles.size() - 1) * piece_bytes;
    const std::int64_t start = now_ns();
    if (backend_.unmap(device_, piece, piece_bytes) != backend::status::ok) break;
    counters_.unmap_ns += now_ns() - start;
    ++counters_.unmap;
    const backend::physical_handle handle = mapping.handles.back();
    mapping.handles.pop_back();
    dedicated_bytes_ -= piece_bytes;
    dedicated_cached_bytes_ -= piece_bytes;
    mapping.bytes -= piece_bytes;
    release_handle(handle);
  }
  if (!mapping.handles.empty()) return false;  // kept, smaller, still a cached mapping
  backend_.free_address_range(device_, base, range_bytes);
  notify_segment_event(device_, segment_event_kind::free, base, range_bytes);
  dedicated_.erase(at);
  return true;
}

void vmm_pool::release_dedicated_mappings(const compaction_pass& pass, std::size_t* cached) noexcept {
  for (auto at = dedicated_.begin(); at != dedicated_.end() && *cached > pass.bytes_to_keep;) {
    auto next = std::next(at);  // release_dedicated erases the entry
    const std::uintptr_t base = at->first;
    const dedicated_mapping& mapping = at->second;
    const bool eligible = !mapping.in_use && !(pass.aged_only && !old_enough(mapping.free_since_epoch)) &&
                          streams_idle(mapping.streams);
    at = next;
    if (!eligible) continue;
    const std::size_t cached_before = dedicated_cached_bytes_;
    release_dedicated(base);
    *cached -= std::min(*cached, cached_before - dedicated_cached_bytes_);
  }
}

}  // namespace fragless::core
