// Large pool: set-up and teardown of both modes, the entry points that choose between them,
// stream ordering on reuse, and releasing blocks. VMM pages: large_pool_pages.cpp;
// cudaMalloc segments: large_pool_segments.cpp; see large_pool.hpp.
#include "core/large_pool.hpp"

#include "backend/capture_aware_backend.hpp"

#include <algorithm>

#include "core/monotonic_clock.hpp"
#include "core/segment_events.hpp"
#include "core/size_classes.hpp"

namespace fragless::core {
large_pool::large_pool(backend::backend& device_backend, int device, event_pool& events,
                       const cache_settings& settings)
    : backend_(device_backend),
      device_(device),
      events_(events),
      settings_(settings),
      compaction_age_passes_(settings.compaction_age_passes < 1 ? 1 : settings.compaction_age_passes),
      reserved_limit_bytes_(settings.conf.max_cached_bytes),
      plan_(settings.conf.loop_plan_headroom) {}

large_pool::~large_pool() {
  // Teardown: give back whatever is left; live blocks are the program's leak.
  for (const auto& [base, mapping] : dedicated_) {
    const std::size_t piece_bytes = mapping.handles.empty() ? 0 : mapping.bytes / mapping.handles.size();
    for (std::size_t index = 0; index < mapping.handles.size(); ++index) {
      backend_.unmap(device_, base + index * piece_bytes, piece_bytes);
      backend_.release_physical(device_, mapping.handles[index]);
    }
    backend_.free_address_range(device_, base, mapping.range_bytes);
  }
  if (uses_vmm_) {
    for (std::size_t page = 0; page < pages_.page_count(); ++page) {
      if (!pages_.is_mapped(page) || pages_.chunk_head(page) != page) continue;  // Note [Physical chunks]
      backend_.unmap(device_, pages_.page_address(page), pages_.chunk_pages(page) * pages_.page_bytes());
      backend_.release_physical(device_, pages_.handle(page));
    }
    for (backend::physical_handle handle : unreleased_) backend_.release_physical(device_, handle);
    backend_.free_address_range(device_, range_base_, range_bytes_);
  } else {
    for (const auto& [base, size] : segments_) backend_.free_segment(device_, reinterpret_cast<void*>(base));
  }
}

backend::status large_pool::initialize(std::size_t range_bytes) noexcept {
  if (settings_.wants_vmm() && backend_.supports_vmm(device_)) {
    const std::size_t page_bytes = backend_.vmm_granularity_bytes(device_);
    const std::size_t bytes = round_up(range_bytes, page_bytes);
    std::uintptr_t base = 0;
    backend::status reserved = backend_.reserve_address_range(device_, bytes, &base);
    if (reserved == backend::status::ok) {
      try {
        pages_ = page_map(base, bytes / page_bytes, page_bytes);
        index_.insert(free_range{base, bytes, 0, {}});
      } catch (...) {
        backend_.free_address_range(device_, base, bytes);
        return backend::status::error;
      }
      uses_vmm_ = true;
      range_base_ = base;
      range_bytes_ = bytes;
      plan_.set_enabled(settings_.conf.loop_plans);  // Note [Loop plans]: VMM mode only
      return backend::status::ok;
    }
    // Fall through to cudaMalloc segments: still correct, just coarser.
  }
  uses_vmm_ = false;
  return backend::status::ok;
}

std::size_t large_pool::reserved_bytes() const noexcept {
  return uses_vmm_ ? pages_.mapped_bytes() + dedicated_bytes_ : segment_bytes_;
}

std::size_t large_pool::device_segment_count() const noexcept {
  return uses_vmm_ ? pages_.mapped_run_count() + dedicated_.size() : segments_.size();
}

std::size_t large_pool::cached_free_bytes() const noexcept {
  if (uses_vmm_) return mapped_cached_bytes();
  std::size_t bytes = 0;
  for (const auto& [base, size] : segments_) {
    auto range = index_.containing(base);
    if (range && range->address == base && range->size_bytes == size) bytes += size;
  }
  return bytes;
}

std::size_t large_pool::largest_free_reserved_bytes() const noexcept {
  if (!uses_vmm_) return index_.largest_bytes();
  std::size_t largest = 0;
  for (const auto& [base, mapping] : dedicated_)
    if (!mapping.in_use) largest = std::max(largest, mapping.bytes);
  index_.for_each([&](const free_range& range) {
    // Longest run of mapped pages' bytes inside this free range.
    std::size_t run = 0;
    const std::uintptr_t end = range.address + range.size_bytes;
    for (std::size_t page = pages_.first_page(range.address); page < pages_.end_page(range.address, range.size_bytes);
         ++page) {
      if (!pages_.is_mapped(page)) {
        run = 0;
        continue;
      }
      const std::uintptr_t start = std::max(range.address, pages_.page_address(page));
      const std::uintptr_t stop = std::min(end, pages_.page_address(page) + pages_.page_bytes());
      run += stop - start;
      largest = std::max(largest, run);
    }
  });
  return largest;
}

std::vector<reserved_region> large_pool::reserved_regions() const {
  std::vector<reserved_region> regions;
  if (!uses_vmm_) {
    for (const auto& [base, size] : segments_) regions.push_back({base, size});
    return regions;
  }
  for (std::size_t page = 0; page < pages_.page_count(); ++page) {
    if (!pages_.is_mapped(page)) continue;
    const std::uintptr_t address = pages_.page_address(page);
    if (!regions.empty() && regions.back().address + regions.back().size_bytes == address)
      regions.back().size_bytes += pages_.page_bytes();
    else
      regions.push_back({address, pages_.page_bytes()});
  }
  if (!dedicated_.empty()) {
    for (const auto& [base, mapping] : dedicated_) regions.push_back({base, mapping.bytes});
    std::sort(regions.begin(), regions.end(),
              [](const reserved_region& a, const reserved_region& b) { return a.address < b.address; });
  }
  return regions;
}

std::vector<reserved_region> large_pool::cached_dedicated_regions() const {
  std::vector<reserved_region> regions;
  for (const auto& [base, mapping] : dedicated_)
    if (!mapping.in_use) regions.push_back({base, mapping.bytes});
  return regions;
}

backend::status large_pool::allocate(std::size_t size_bytes, stream_id stream, std::uintptr_t* address,
                                     std::size_t* placed_bytes) noexcept {
  try {
    if (placed_bytes != nullptr) *placed_bytes = size_bytes;
    if (uses_vmm_ && size_bytes >= settings_.conf.dedicated_mapping_threshold_bytes && !huge_block_fits_shared_pages(size_bytes))
      return allocate_dedicated(size_bytes, stream, address, placed_bytes);
    return uses_vmm_ ? allocate_vmm(size_bytes, stream, address, placed_bytes)
                     : allocate_segment(size_bytes, stream, address, placed_bytes);
  } catch (...) {  // std::bad_alloc from the index: host memory, not device memory
    return backend::status::error;
  }
}

// The large pool's part of Note [Stream reuse]: a free range remembers which streams freed
// into it. Reusing it on one of them alone needs nothing: that stream's order already puts
// the new work after the old. Reusing it on any other stream makes the new stream wait on
// an event recorded now on each of those streams (cudaStreamWaitEvent): it covers every
// kernel queued before the free, and the host never blocks.
bool large_pool::wait_forbidden(const stream_set& streams, stream_id stream) const noexcept {
  return !settings_.unsafe_skip_stream_waits && backend::capture_underway() && streams.foreign_to(stream);
}

backend::status large_pool::order_after_streams(const free_range& range, stream_id stream) noexcept {
  if (settings_.unsafe_skip_stream_waits || !range.streams.foreign_to(stream)) return backend::status::ok;
  for (stream_id other : range.streams.streams()) {
    if (other == stream) continue;
    if (events_.order_after(stream, other) == backend::status::ok) {
      ++counters_.cross_stream_waits;
      continue;
    }
    // The stream may have been destroyed since it freed here (its handle is dead but its
    // work still runs to completion). Only a device synchronization orders us after it;
    // it also makes every free range clean.
    backend::status synchronized = backend_.synchronize_device(device_);
    if (synchronized != backend::status::ok) return synchronized;
    ++counters_.device_syncs;
    index_.forget_streams();
    return backend::status::ok;
  }
  return backend::status::ok;
}

void large_pool::release(std::uintptr_t address, std::size_t size_bytes, const stream_set& streams) noexcept {
  if (!dedicated_.empty()) {
    auto at = dedicated_.find(address);
    if (at != dedicated_.end()) {
      try {
        at->second.streams = streams;
      } catch (...) {
        return;  // no host memory: the mapping stays unavailable rather than unsafe
      }
      at->second.in_use = false;
      at->second.free_since_epoch = pages_.epoch();
      dedicated_cached_bytes_ += at->second.bytes;
      return;
    }
  }
  try {
    std::uint64_t segment_id = 0;
    if (!uses_vmm_) {
      auto segment = std::prev(segments_.upper_bound(address));
      segment_id = segment->first;
    }
    if (uses_vmm_ && in_plan_range(address)) segment_id = kPlanSegmentId;
    index_.insert(free_range{address, size_bytes, segment_id, streams});
    if (uses_vmm_) {
      pages_.remove_live(address, size_bytes);
      auto placed = placed_blocks_.find(address);
      if (placed != placed_blocks_.end()) {
        const std::uint64_t sequence = placed->second.sequence;
        placed_blocks_.erase(placed);
        if (sequence != 0) plan_.record_release(sequence, churn_count());
        after_plan_event();
      }
    }
  } catch (...) {
    // Only std::bad_alloc can land here: the block stays unavailable (a host-memory
    // shortage must not corrupt device bookkeeping).
  }
}

}  // namespace fragless::core
