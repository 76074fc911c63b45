// Large pool: best-fit placement plus the VMM page cache or cudaMalloc segments
// (see large_pool.hpp, Note [Page cache]).
#include "core/large_pool.hpp"

#include "backend/capture_aware_backend.hpp"

#include <algorithm>

#include "core/monotonic_clock.hpp"
#include "core/segment_events.hpp"
#include "core/size_classes.hpp"

namespace fragless::core {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

// How many cached pages an allocation inspects before creating a new one instead.
constexpr int kMoveCandidates = 8;

}  // namespace

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
      if (!pages_.is_mapped(page)) continue;
      backend_.unmap(device_, pages_.page_address(page), pages_.page_bytes());
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
    if (uses_vmm_ && size_bytes >= settings_.conf.dedicated_mapping_threshold_bytes)
      return allocate_dedicated(size_bytes, stream, address, placed_bytes);
    return uses_vmm_ ? allocate_vmm(size_bytes, stream, address, placed_bytes)
                     : allocate_segment(size_bytes, stream, address, placed_bytes);
  } catch (...) {  // std::bad_alloc from the index: host memory, not device memory
    return backend::status::error;
  }
}

// Note [Stream reuse] (the large pool's part): a free range remembers which streams freed
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

// Note [Placement]
std::optional<std::pair<std::uintptr_t, free_range>> large_pool::choose_placement(std::size_t size_bytes) const {
  // Ordinary placement never enters a loop plan's range (Note [Loop plans]).
  std::optional<free_range> range =
      plan_range_bytes_ == 0 ? index_.best_fit(size_bytes) : index_.best_fit_in(size_bytes, 0);
  if (!range) return std::nullopt;
  const std::uintptr_t at_end = range->address + range->size_bytes - size_bytes;
  const std::size_t new_pages_at_start = pages_.unmapped_pages(range->address, size_bytes, SIZE_MAX);
  const std::size_t new_pages_at_end = pages_.unmapped_pages(at_end, size_bytes, new_pages_at_start + 1);
  bool use_end = new_pages_at_end < new_pages_at_start;
  if (new_pages_at_end == new_pages_at_start && at_end != range->address && size_bytes < pages_.page_bytes())
    use_end = block_of_size_starts_at(range->address + range->size_bytes, size_bytes) &&
              !block_of_size_ends_at(range->address, size_bytes);
  return std::make_pair(use_end ? at_end : range->address, *range);
}

bool large_pool::block_of_size_ends_at(std::uintptr_t address, std::size_t size_bytes) const noexcept {
  auto after = placed_blocks_.lower_bound(address);
  if (after == placed_blocks_.begin()) return false;
  const auto& [start, block] = *std::prev(after);
  return block.size_bytes == size_bytes && start + block.size_bytes == address;
}

bool large_pool::block_of_size_starts_at(std::uintptr_t address, std::size_t size_bytes) const noexcept {
  auto at = placed_blocks_.find(address);
  return at != placed_blocks_.end() && at->second.size_bytes == size_bytes;
}

backend::status large_pool::allocate_vmm(std::size_t size_bytes, stream_id stream, std::uintptr_t* address,
                                         std::size_t* placed_bytes) {
  bool planned = false;
  const bool recorded = unplanned_scopes_ == 0;
  std::optional<std::size_t> offset = recorded ? plan_.planned_offset(size_bytes, stream) : std::nullopt;
  if (offset) {
    backend::status result = allocate_planned(plan_base_ + *offset, size_bytes, stream, &planned);
    if (result != backend::status::ok) {
      plan_.abandon("the device refused a page");
      after_plan_event();
      return result;
    }
    if (planned) *address = plan_base_ + *offset;
  }
  if (!planned) {
    auto placement = choose_placement(size_bytes);
    if (!placement) return allocate_stitched(size_bytes, stream, address, placed_bytes);
    const auto& [block_address, range] = *placement;
    if (wait_forbidden(range.streams, stream)) return allocate_stitched(size_bytes, stream, address, placed_bytes);
    backend::status result = place_block(block_address, size_bytes, range, stream, false);
    if (result != backend::status::ok) return result;
    *address = block_address;
  }
  const std::uint64_t sequence = recorded ? plan_.record_allocation(size_bytes, stream, planned, counters_.page_moves) : 0;
  try {
    placed_blocks_.emplace(*address, placed_block{size_bytes, sequence});
  } catch (...) {
    // Only a placement hint is lost (Note [Placement]).
  }
  after_plan_event();
  return backend::status::ok;
}

backend::status large_pool::place_block(std::uintptr_t address, std::size_t size_bytes, const free_range& range,
                                        stream_id stream, bool planned) {
  backend::status result = order_after_streams(range, stream);
  if (result != backend::status::ok) return result;
  result = map_missing_pages(address, size_bytes, planned);
  if (result != backend::status::ok) return result;
  index_.carve(address, size_bytes);
  pages_.add_live(address, size_bytes);
  return backend::status::ok;
}

backend::status large_pool::map_missing_pages(std::uintptr_t address, std::size_t size_bytes,
                                              bool move_first) noexcept {
  const std::size_t first = pages_.first_page(address);
  const std::size_t end = pages_.end_page(address, size_bytes);
  for (std::size_t page = first; page < end; ++page) {
    if (pages_.is_mapped(page)) continue;
    backend::physical_handle handle = 0;
    backend::status taken = take_page(first, end, move_first, &handle);
    if (taken != backend::status::ok) return taken;
    backend::status mapped = map_page(page, handle);
    if (mapped != backend::status::ok) {
      // The handle is in no page's hands now: give it back. Pages mapped earlier in this
      // call stay mapped as cached free pages, so the pool stays consistent.
      release_handle(handle);
      return mapped;
    }
  }
  return backend::status::ok;
}

// Note [Page moves]
backend::status large_pool::take_page(std::size_t first, std::size_t end, bool move_first,
                                      backend::physical_handle* handle) noexcept {
  const bool may_grow = reserved_bytes() + pages_.page_bytes() <= reserved_limit_bytes_;
  backend::status created = backend::status::out_of_memory;
  const bool create_first = !move_first && (!settings_.conf.page_moves || pages_.mapped_count() < growth_allowance_pages());
  if (create_first && may_grow) {
    created = backend_.create_physical(device_, pages_.page_bytes(), handle);
    if (created == backend::status::ok) {
      ++counters_.device_alloc;
      return created;
    }
    // The device refused: a move is the only way left.
  }
  if (take_cached_page(first, end, handle)) return backend::status::ok;
  if (create_first || !may_grow) return created;  // no second create after a refusal
  created = backend_.create_physical(device_, pages_.page_bytes(), handle);
  if (created == backend::status::ok) ++counters_.device_alloc;
  return created;
}

// Note [Page moves]: how many pages may be mapped before a missing page is moved rather
// than created: the headroom over the peak of live bytes, and never fewer than the peak of
// pages live blocks touched at once (below that, moving cannot help).
std::size_t large_pool::growth_allowance_pages() const noexcept {
  if (settings_.conf.page_move_headroom <= 0.0) return 0;
  const double allowed_bytes = static_cast<double>(pages_.live_high_water_bytes()) * (1.0 + settings_.conf.page_move_headroom);
  const auto allowed_pages = static_cast<std::size_t>(allowed_bytes / static_cast<double>(pages_.page_bytes()));
  return std::max(pages_.touched_high_water_pages(), allowed_pages);
}

// Moves a cached free page (outside [first, end)) whose past users are all done.
bool large_pool::take_cached_page(std::size_t first, std::size_t end, backend::physical_handle* handle) noexcept {
  const auto& cached = pages_.cached_free_pages();
  int inspected = 0;
  // A loop plan's pages stay where the plan needs them every step (Note [Loop plans]).
  const std::size_t plan_first = plan_range_bytes_ == 0 ? SIZE_MAX : pages_.first_page(plan_base_);
  const std::size_t plan_end = plan_range_bytes_ == 0 ? SIZE_MAX : pages_.end_page(plan_base_, plan_range_bytes_);
  // Highest addresses first: blocks drift towards the start of the range.
  for (auto at = cached.rbegin(); at != cached.rend() && inspected < kMoveCandidates; ++at) {
    const std::size_t page = *at;
    if (page >= first && page < end) continue;
    if (page >= plan_first && page < plan_end) {
      // Skip the plan's pages at once: go on from the highest page below them.
      auto below = std::make_reverse_iterator(cached.lower_bound(plan_first));
      if (below == cached.rend()) break;
      at = std::prev(below);  // the loop's ++at lands on *below
      continue;
    }
    ++inspected;
    if (!make_range_idle(pages_.page_address(page))) continue;
    const std::int64_t start = now_ns();
    if (backend_.unmap(device_, pages_.page_address(page), pages_.page_bytes()) != backend::status::ok) continue;
    counters_.unmap_ns += now_ns() - start;
    ++counters_.unmap;
    ++counters_.page_moves;
    notify_segment_event(device_, segment_event_kind::unmap, pages_.page_address(page), pages_.page_bytes());
    *handle = pages_.set_unmapped(page);
    return true;
  }
  return false;
}

bool large_pool::streams_idle(const stream_set& streams) noexcept {
  for (stream_id stream : streams.streams())
    if (events_.stream_idle(stream) != backend::status::ok) return false;
  return true;
}

bool large_pool::make_range_idle(std::uintptr_t address) noexcept {
  std::optional<free_range> range = index_.containing(address);
  if (!range || range->streams.empty()) return true;
  if (!streams_idle(range->streams)) return false;
  // Every stream of the range is idle now: the whole range is clean.
  try {
    index_.carve(range->address, range->size_bytes);
    index_.insert(free_range{range->address, range->size_bytes, range->segment_id, {}});
  } catch (...) {
    return false;
  }
  return true;
}

backend::status large_pool::map_page(std::size_t page, backend::physical_handle handle) noexcept {
  const std::int64_t start = now_ns();
  backend::status result = backend_.map(device_, pages_.page_address(page), pages_.page_bytes(), handle);
  counters_.map_ns += now_ns() - start;
  if (result != backend::status::ok) return result;
  ++counters_.map;
  pages_.set_mapped(page, handle);
  notify_segment_event(device_, segment_event_kind::map, pages_.page_address(page), pages_.page_bytes());
  return backend::status::ok;
}

void large_pool::release_handle(backend::physical_handle handle) noexcept {
  if (backend_.release_physical(device_, handle) == backend::status::ok) {
    ++counters_.device_free;
    return;
  }
  try {
    unreleased_.push_back(handle);
  } catch (...) {
  }
}

// Note [Segment sizes]
std::size_t large_pool::segment_size_for(std::size_t size_bytes) const noexcept {
  if (size_bytes <= settings_.conf.small_segment_bytes / 2) return settings_.conf.small_segment_bytes;
  if (size_bytes < settings_.conf.large_segment_bytes / 2) return settings_.conf.large_segment_bytes;
  return round_up(size_bytes, 2 * kMiB);
}

// Note [Max split size]
std::optional<free_range> large_pool::segment_fit(std::size_t size_bytes) const {
  std::optional<free_range> range = index_.best_fit(size_bytes);
  if (!range || settings_.conf.max_split_bytes == unlimited_bytes) return range;
  // Best fit is the smallest fitting range: if it is too large, every other one is too.
  if (size_bytes < settings_.conf.max_split_bytes && range->size_bytes >= settings_.conf.max_split_bytes) return std::nullopt;
  if (size_bytes >= settings_.conf.max_split_bytes && range->size_bytes - size_bytes >= settings_.conf.large_segment_bytes) return std::nullopt;
  return range;
}

backend::status large_pool::allocate_segment(std::size_t size_bytes, stream_id stream, std::uintptr_t* address,
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
  backend::status result = order_after_streams(*range, stream);
  if (result != backend::status::ok) return result;
  // Note [Max split size]: an oversize block takes its whole range, never splitting it.
  const std::size_t take_bytes = size_bytes >= settings_.conf.max_split_bytes ? range->size_bytes : size_bytes;
  index_.carve(range->address, take_bytes);
  *address = range->address;
  if (placed_bytes != nullptr) *placed_bytes = take_bytes;
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
        if (sequence != 0) plan_.record_release(sequence, counters_.page_moves);
        after_plan_event();
      }
    }
  } catch (...) {
    // Only std::bad_alloc can land here: the block stays unavailable (a host-memory
    // shortage must not corrupt device bookkeeping).
  }
}

}  // namespace fragless::core
