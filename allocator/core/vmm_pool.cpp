// The large pool in VMM mode (see vmm_pool.hpp): set-up and teardown of the shared range,
// the entry point that chooses between the shared range and a mapping of its own, and
// releasing blocks. Placement and pages: vmm_pool_pages.cpp; chunks moved, created and
// released: vmm_pool_chunks.cpp; mappings: vmm_pool_mappings.cpp.
// Invariant: see vmm_pool.hpp.
// Not thread-safe: the device cache holds the device lock around every call.
#include "core/vmm_pool.hpp"

#include <algorithm>

#include "core/size_classes.hpp"

namespace fragless::core {

vmm_pool::vmm_pool(backend::backend& device_backend, int device, event_pool& events, const cache_settings& settings)
    : large_pool(device_backend, device, events, settings),
      compaction_age_passes_(settings.compaction_age_passes < 1 ? 1 : settings.compaction_age_passes),
      plan_(settings.conf.loop_plan_headroom, settings.conf.loop_plan_churn_headroom, settings.conf.loop_plan_threads,
            settings.conf.loop_plan_stream_affinity) {}

vmm_pool::~vmm_pool() {
  // Teardown: give back whatever is left; live blocks are the program's leak. Dormant
  // ranges first (Note [Dormant mappings]): their handles are mapped elsewhere too.
  for (const dormant_mappings::mapping* dormant = dormant_.first_overlapping(0, pages_.page_count()); dormant != nullptr;
       dormant = dormant_.first_overlapping(0, pages_.page_count())) {
    backend_.unmap(device_, pages_.page_address(dormant->head), dormant->pages * pages_.page_bytes());
    dormant_.remove(dormant->head);
  }
  for (const auto& [base, mapping] : dedicated_) {
    const std::size_t piece_bytes = mapping.handles.empty() ? 0 : mapping.bytes / mapping.handles.size();
    for (std::size_t index = 0; index < mapping.handles.size(); ++index) {
      backend_.unmap(device_, base + index * piece_bytes, piece_bytes);
      backend_.release_physical(device_, mapping.handles[index]);
    }
    backend_.free_address_range(device_, base, mapping.range_bytes);
  }
  if (range_bytes_ == 0) return;  // initialize() failed: nothing reserved
  for (std::size_t page = 0; page < pages_.page_count(); ++page) {
    if (!pages_.is_mapped(page) || pages_.chunk_head(page) != page) continue;  // Note [Physical chunks]
    backend_.unmap(device_, pages_.page_address(page), pages_.chunk_pages(page) * pages_.page_bytes());
    backend_.release_physical(device_, pages_.handle(page));
  }
  for (backend::physical_handle handle : unreleased_) backend_.release_physical(device_, handle);
  backend_.free_address_range(device_, range_base_, range_bytes_);
}

bool vmm_pool::initialize(std::size_t range_bytes, bool* host_memory_failed) noexcept {
  const std::size_t page_bytes = backend_.vmm_granularity_bytes(device_);
  const std::size_t bytes = round_up(range_bytes, page_bytes);
  std::uintptr_t base = 0;
  if (backend_.reserve_address_range(device_, bytes, &base) != backend::status::ok) return false;
  try {
    pages_ = page_map(base, bytes / page_bytes, page_bytes);
    dormant_ = dormant_mappings(bytes / page_bytes);
    index_.insert(free_range{base, bytes, 0, {}});
  } catch (...) {
    backend_.free_address_range(device_, base, bytes);
    *host_memory_failed = true;
    return false;
  }
  range_base_ = base;
  range_bytes_ = bytes;
  plan_.set_enabled(settings_.conf.loop_plans);  // Note [Loop plans]: VMM mode only
  return true;
}

std::size_t vmm_pool::largest_free_reserved_bytes() const noexcept {
  std::size_t largest = 0;
  for (const auto& [base, mapping] : dedicated_)
    if (!mapping.in_use) largest = std::max(largest, mapping.bytes);
  // Each free extent (a plan's touching pieces are one, Note [Piece segments]): its
  // longest run of mapped pages' bytes.
  index_.for_each_extent([&](std::uintptr_t address, std::size_t size_bytes) {
    std::size_t run = 0;
    const std::uintptr_t end = address + size_bytes;
    for (std::size_t page = pages_.first_page(address); page < pages_.end_page(address, size_bytes); ++page) {
      if (!pages_.is_mapped(page)) {
        run = 0;
        continue;
      }
      const std::uintptr_t start = std::max(address, pages_.page_address(page));
      const std::uintptr_t stop = std::min(end, pages_.page_address(page) + pages_.page_bytes());
      run += stop - start;
      largest = std::max(largest, run);
    }
  });
  return largest;
}

std::vector<reserved_region> vmm_pool::reserved_regions() const {
  std::vector<reserved_region> regions;
  // Each run of mapped pages, a word of 64 pages at a time (most of the range is unmapped).
  const std::size_t page_count = pages_.page_count();
  for (std::size_t page = pages_.first_mapped(0, page_count); page < page_count;) {
    const std::size_t run_end = pages_.first_unmapped(page, page_count);
    regions.push_back({pages_.page_address(page), (run_end - page) * pages_.page_bytes()});
    page = pages_.first_mapped(run_end, page_count);
  }
  if (!dedicated_.empty()) {
    for (const auto& [base, mapping] : dedicated_) regions.push_back({base, mapping.bytes});
    std::sort(regions.begin(), regions.end(),
              [](const reserved_region& a, const reserved_region& b) { return a.address < b.address; });
  }
  return regions;
}

std::vector<reserved_region> vmm_pool::cached_dedicated_regions() const {
  std::vector<reserved_region> regions;
  for (const auto& [base, mapping] : dedicated_)
    if (!mapping.in_use) regions.push_back({base, mapping.bytes});
  return regions;
}

backend::status vmm_pool::allocate(std::size_t size_bytes, stream_id stream, std::uintptr_t* address,
                                     std::size_t* placed_bytes) noexcept {
  try {
    if (placed_bytes != nullptr) *placed_bytes = size_bytes;
    // Note [Loop plans]: a deviation abandons the plan before the request is placed.
    if (unplanned_scopes_ == 0 && plan_.deviates(size_bytes, stream)) {
      plan_.abandon("another allocation");
      after_plan_event();
    }
    // Note [Loop plans]: a huge request the plan places goes to its planned place.
    auto plan_places = [&] { return unplanned_scopes_ == 0 && plan_.planned_offset(size_bytes, stream).has_value(); };
    if (size_bytes >= settings_.conf.dedicated_mapping_threshold_bytes && !plan_places() &&
        !huge_block_goes_shared(size_bytes)) {
      backend::status result = allocate_dedicated(size_bytes, stream, address, placed_bytes);
      if (result == backend::status::ok) record_mapping_allocation(*address, size_bytes, stream);
      return result;
    }
    return allocate_vmm(size_bytes, stream, address, placed_bytes);
  } catch (...) {  // std::bad_alloc from the index: host memory, not device memory
    return backend::status::error;
  }
}

bool vmm_pool::release(std::uintptr_t address, std::size_t size_bytes, const stream_set& streams) noexcept {
  freed_a_block_ = true;  // Note [First growth]
  if (!dedicated_.empty()) {
    auto at = dedicated_.find(address);
    if (at != dedicated_.end()) {
      try {
        at->second.streams = freed_now(streams);
      } catch (...) {
        return false;  // no host memory: the caller keeps the block (Note [Pending without host memory])
      }
      at->second.in_use = false;
      at->second.free_since_epoch = pages_.epoch();
      dedicated_cached_bytes_ += at->second.bytes;
      const std::uint64_t sequence = at->second.plan_sequence;
      at->second.plan_sequence = 0;
      if (sequence != 0) {
        plan_.record_release(sequence, churn());
        after_plan_event();
      }
      return true;
    }
  }
  try {
    const std::uint64_t segment_id = in_plan_range(address) ? kPlanSegmentId : 0;
    // free_index::insert changes nothing when it throws (Note [Index nodes]).
    index_.insert(free_range{address, size_bytes, segment_id, freed_now(streams)});
  } catch (...) {
    return false;  // only std::bad_alloc: the caller keeps the block (Note [Pending without host memory])
  }
  try {
    pages_.remove_live(address, size_bytes);
    placed_block placed;
    if (placed_blocks_.erase(address, &placed)) {
      const std::uint64_t sequence = placed.sequence;
      if (sequence == 0) unrecorded_live_bytes_ -= std::min(unrecorded_live_bytes_, size_bytes);  // Note [Refused layouts]
      if (sequence != 0) plan_.record_release(sequence, churn());
      after_plan_event();
    }
  } catch (...) {
    // Only std::bad_alloc can land here, once the block is free in the index: released.
  }
  return true;
}

// Note [Loop plans]: the plan sees every request of the large pool, whichever way it was
// served, so that a huge request served by a mapping in one step and by the shared range
// in the next is the same token in both.
void vmm_pool::record_mapping_allocation(std::uintptr_t base, std::size_t size_bytes, stream_id stream) noexcept {
  if (unplanned_scopes_ != 0) return;
  const std::uint64_t sequence = plan_.record_allocation(size_bytes, stream, churn(), true);
  auto at = dedicated_.find(base);
  if (at != dedicated_.end()) at->second.plan_sequence = sequence;
  after_plan_event();
}

// Note [Retired streams]: cached mappings remember streams too.
void vmm_pool::forget_streams() noexcept {
  large_pool::forget_streams();
  for (auto& [base, mapping] : dedicated_) mapping.streams.clear();
}

bool vmm_pool::rename_stream(stream_id from, stream_id to) {
  bool renamed = large_pool::rename_stream(from, to);
  for (auto& [base, mapping] : dedicated_) renamed |= mapping.streams.rename(from, to);
  return renamed;
}

}  // namespace fragless::core
