// The read side of a device cache: composing the stats (Note [Stats pools]), resetting
// them, and the snapshot. Invariant: what stats() reports for the layout figures is
// exactly what stats_from_snapshot() computes from snapshot() at the same moment.
#include <algorithm>
#include <array>
#include <unordered_map>
#include <vector>

#include "core/device_cache.hpp"
#include "core/size_classes.hpp"

namespace fragless::core {
// Note [Stats pools] (the per-allocation half). The per-allocation stats (the
// FRAGLESS_PER_ALLOCATION_STAT rows of core/stat_sources.def: allocation, active,
// allocated_bytes, active_bytes, requested_bytes) change on every allocation and free. Their large-pool
// part lives in stats_, which only code holding the device lock reads or writes (the large
// path holds it anyway; so does a stats read, Note [Large-pool accounting]); their
// small-pool part lives in each shard (shard_stats, written under the shard lock only), so
// the small hot path shares no counter between threads. "all" is composed when read. Peaks
// of the small and all figures are sampled -- at every large allocation, every new slab
// and every stats read -- so a peak reached by small allocations alone between two
// samples can be missed; large-pool peaks, reserved bytes and segments are exact.
namespace {

// Calls visit(device field, shard field, sum field) once per FRAGLESS_PER_ALLOCATION_STAT
// of core/stat_sources.def.
template <typename Visit>
void for_each_per_allocation_stat(Visit&& visit) {
#define FRAGLESS_PER_ALLOCATION_STAT(name) \
  visit(&device_stats::name, &shard_stats::name, &small_pool_sums::name);
#include "core/stat_sources.def"
}

}  // namespace

// Holds device_mutex_, which keeps shard_list_ (no walk of the shard table, no lock of it).
small_pool_sums device_cache::sum_small_stats() {
  small_pool_sums sums;
  for (stream_shard* shard : shard_list_)
    for_each_per_allocation_stat([&](auto, auto shard_field, auto sum_field) {
      const shard_stat& counter = shard->counters().*shard_field;
      stat& sum = sums.*sum_field;
      sum.current += counter.current.load(std::memory_order_relaxed);
      sum.allocated += counter.allocated.load(std::memory_order_relaxed);
      sum.freed += counter.freed.load(std::memory_order_relaxed);
    });
  return sums;
}

// Note [Peaks at a large allocation]
// Every large allocation (and new slab) samples the small and all peaks of the
// per-allocation stats (Note [Stats pools]), so it reads the small pool's currents from
// every shard. Done as a stats read does it -- a small_pool_sums of every field (five
// stats of four counters) built, then folded -- it cost a steady corpus huge-tensors pass
// about 9 ns of its 150 per operation: only the five currents are summed, into an array
// (six seeds, 30 repetitions, the steady passes: 152 -> 143 ns/op, three alternated runs
// in each order; with no sampling at all, 137-138 in a first, one-order comparison).
small_pool_currents device_cache::sum_small_currents_locked() noexcept {
  small_pool_currents currents{};
  for (stream_shard* shard : shard_list_) {
    std::size_t index = 0;
    for_each_per_allocation_stat([&](auto, auto shard_field, auto) {
      currents[index++] += (shard->counters().*shard_field).current.load(std::memory_order_relaxed);
    });
  }
  return currents;
}

void device_cache::sample_peaks_locked(const small_pool_currents& small_currents) noexcept {
  std::size_t index = 0;
  for_each_per_allocation_stat([&](auto device_field, auto, auto) {
    pool_stat& s = stats_.*device_field;
    const std::int64_t small_current = small_currents[index++];
    s[pool_small].peak = std::max(s[pool_small].peak, small_current);
    s[pool_all].peak = std::max(s[pool_all].peak, small_current + s[pool_large].current);
  });
}

std::int64_t device_cache::active_blocks() {
  std::lock_guard<std::mutex> device_lock(device_mutex_);  // stats_ (Note [Stats pools])
  std::int64_t small_active = 0;
  for (stream_shard* shard : shard_list_) small_active += shard->counters().active.current.load(std::memory_order_relaxed);
  return small_active + stats_.active[pool_large].current;
}

void device_cache::reset_peak_stats() {
  std::lock_guard<std::mutex> device_lock(device_mutex_);  // stats_ (Note [Stats pools])
  const small_pool_currents small_currents = sum_small_currents_locked();
  stats_.reset_peak();
  std::size_t index = 0;
  for_each_per_allocation_stat([&](auto device_field, auto, auto) {
    pool_stat& s = stats_.*device_field;
    const std::int64_t small_current = small_currents[index++];
    s[pool_small].peak = small_current;
    s[pool_all].peak = small_current + s[pool_large].current;
  });
}

void device_cache::reset_accumulated_stats() {
  std::lock_guard<std::mutex> device_lock(device_mutex_);  // Note [Large-pool accounting]; shard_list_
  for (stream_shard* shard : shard_list_) {
    std::lock_guard<spin_lock> shard_lock(shard->mutex());
    for_each_per_allocation_stat([&](auto, auto shard_field, auto) {
      (shard->counters().*shard_field).allocated.store(0, std::memory_order_relaxed);
      (shard->counters().*shard_field).freed.store(0, std::memory_order_relaxed);
    });
  }
  fold_large_pool_counters_locked();  // what accrued before the reset is reset with the rest
  stats_.reset_accumulated();
}

// ---------------------------------------------------------------------------------------
// Stats and snapshot

device_stats device_cache::stats(bool with_layout) {
  // Segment counts, inactive splits and the largest free block are shapes of the layout,
  // not running sums: they are read off the snapshot (Note [Stats from snapshot]) and
  // their peaks tracked at each read. Everything else is a running counter.
  device_stats shape;
  if (with_layout) shape = stats_from_snapshot(snapshot(), device_);
  std::lock_guard<std::mutex> device_lock(device_mutex_);
  const small_pool_sums sums = sum_small_stats();
  fold_large_pool_counters_locked();  // Note [Large-pool accounting]
  for (pool_stat device_stats::*field : {&device_stats::segment, &device_stats::inactive_split,
                                         &device_stats::inactive_split_bytes}) {
    if (!with_layout) break;
    for (std::size_t pool : {std::size_t{pool_all}, std::size_t{pool_small}, std::size_t{pool_large}}) {
      stat& target = (stats_.*field)[pool];
      const std::int64_t value = (shape.*field)[pool].current;
      if (value > target.current) target.allocated += value - target.current;
      else target.freed += target.current - value;
      target.current = value;
      target.peak = std::max(target.peak, value);
    }
  }
  if (with_layout) {
    stats_.largest_free_block_bytes = shape.largest_free_block_bytes;
    // Oversize segments are a layout figure too (Note [Max split size]).
    stat& target = stats_.oversize_segments;
    const std::int64_t value = shape.oversize_segments.current;
    if (value > target.current) target.allocated += value - target.current;
    else target.freed += target.current - value;
    target.current = value;
    target.peak = std::max(target.peak, value);
  }
  small_pool_currents small_currents{};
  std::size_t index = 0;
  for_each_per_allocation_stat([&](auto, auto, auto sum_field) { small_currents[index++] = (sums.*sum_field).current; });
  sample_peaks_locked(small_currents);
  device_stats copy = stats_;
  for_each_per_allocation_stat([&](auto device_field, auto, auto sum_field) {
    pool_stat& s = copy.*device_field;
    const stat& small = sums.*sum_field;
    s[pool_small].current = small.current;
    s[pool_small].allocated = small.allocated;
    s[pool_small].freed = small.freed;
    s[pool_all].current = s[pool_small].current + s[pool_large].current;
    s[pool_all].allocated = s[pool_small].allocated + s[pool_large].allocated;
    s[pool_all].freed = s[pool_small].freed + s[pool_large].freed;
  });
  return copy;
}

// Note [Large-pool accounting]
// The large pool's figures reach stats_ in two halves. Reserved bytes, segments and mapped
// pages have peaks, so they are folded in whenever they change -- at every slow-path point
// (account_device_locked, after each large allocation and free) -- but they change only
// with a device call, so a point where all three are as last folded does no more.
// The running counters (device calls, waits, page moves, plans, events created) have no
// peak: they are folded in when the stats are read or reset (fold_large_pool_counters_locked,
// under the device lock), not at every allocation, where planned placements and standing
// waits change some of them every time.

// Holds device_mutex_.
void device_cache::account_device_locked() noexcept {
  const std::size_t reserved = large_->reserved_bytes();
  reserved_high_water_bytes_ = std::max(reserved_high_water_bytes_, reserved);
  const std::size_t segments = large_->device_segment_count();
  const std::size_t mapped_pages = large_->mapped_page_count();
  if (reserved == accounted_reserved_bytes_ && segments == accounted_segments_ &&
      mapped_pages == accounted_mapped_pages_)
    return;
  if (reserved != accounted_reserved_bytes_)
    update(stats_.reserved_bytes, pool_large, as_signed(reserved) - as_signed(accounted_reserved_bytes_));
  if (segments != accounted_segments_)
    update(stats_.segment, pool_large, as_signed(segments) - as_signed(accounted_segments_));
  stats_.pages_mapped.current = static_cast<std::int64_t>(mapped_pages);
  stats_.pages_mapped.peak = std::max(stats_.pages_mapped.peak, stats_.pages_mapped.current);
  accounted_reserved_bytes_ = reserved;
  accounted_segments_ = segments;
  accounted_mapped_pages_ = mapped_pages;
}

// Holds device_mutex_. Note [Large-pool accounting].
void device_cache::fold_large_pool_counters_locked() noexcept {
  const large_pool_counters& now = large_->counters();
  const loop_plan_counters& plans = large_->loop_plan_counts();
#define FRAGLESS_LARGE_POOL_COUNTER(member, stat, description) \
  stats_.stat += now.member - accounted_counters_.member;
#define FRAGLESS_LOOP_PLAN_COUNTER(member, stat, description) \
  stats_.stat += plans.member - accounted_plan_counters_.member;
#include "core/stat_sources.def"
  accounted_counters_ = now;
  accounted_plan_counters_ = plans;
  stats_.num_events_created = events_.created_count();
}

// Note [Snapshot outside the lock]
// A snapshot walks every live block, free range and slab, and once a second the stats
// publisher takes one for the layout figures (Note [Publishing stats]). Built under the
// device lock -- a std::map node per large block, a hash entry per small object -- it held
// every large allocation and free of the device for 4 ms at 20,000 live blocks and 25 ms
// at 100,000. So the lock covers only flat copies of what the layout is made of (the
// capture: live and pending blocks, free ranges clipped to reserved memory, each slab's
// free and pending slots), and sorting, matching and cutting segments happen after it is
// released. The capture is the layout at one moment, as before: nothing is read twice.
namespace {

std::uint64_t stream_number(stream_id stream) noexcept { return reinterpret_cast<std::uintptr_t>(stream); }

struct captured_slab {
  std::uintptr_t address = 0;
  std::size_t bytes = 0;
  stream_id stream{};
  std::uint32_t class_index = 0;
  std::uint32_t capacity = 0;
  std::vector<std::uint32_t> free_slots;
  std::vector<std::pair<std::uint32_t, std::size_t>> pending;  // (slot, bytes) of pending frees
};

// What a snapshot is made of, copied under the device lock (Note [Snapshot outside the lock]).
struct layout_capture {
  std::vector<snapshot_block> large;  // live, pending and free, in that order; unsorted
  std::vector<std::pair<std::uintptr_t, std::size_t>> small_requested;  // live small objects
  std::vector<reserved_region> regions;
  std::vector<captured_slab> slabs;
};

// A slab's objects by address: free runs coalesced, pending frees, and every other slot
// allocated (its requested size from the live-block map when it is there).
std::vector<snapshot_block> slab_objects(const captured_slab& one,
                                         const std::unordered_map<std::uintptr_t, std::size_t>& small_requested) {
  std::vector<snapshot_block> objects;
  const std::size_t object_bytes = class_size_bytes(one.class_index);
  // 0: allocated, 1: free, 2: pending free
  std::vector<std::uint8_t> state(one.capacity, 0);
  for (std::uint32_t slot : one.free_slots)
    if (slot < one.capacity) state[slot] = 1;
  std::vector<std::size_t> pending_bytes(one.capacity, 0);
  for (const auto& [slot, bytes] : one.pending)
    if (slot < one.capacity) state[slot] = 2, pending_bytes[slot] = bytes;
  for (std::uint32_t slot = 0; slot < one.capacity;) {
    const std::uintptr_t address = one.address + std::size_t{slot} * object_bytes;
    if (state[slot] == 1) {
      std::uint32_t end = slot + 1;
      while (end < one.capacity && state[end] == 1) ++end;  // coalesce a free run
      objects.push_back(snapshot_block{address, (end - slot) * object_bytes, 0, block_state::free});
      slot = end;
      continue;
    }
    if (state[slot] == 2) {
      objects.push_back(snapshot_block{address, pending_bytes[slot], 0, block_state::pending_free});
    } else {
      const auto requested = small_requested.find(address);
      objects.push_back(snapshot_block{address, object_bytes,
                                       requested != small_requested.end() ? requested->second : object_bytes,
                                       block_state::allocated});
    }
    ++slot;
  }
  const std::size_t covered = std::size_t{one.capacity} * object_bytes;
  if (covered < one.bytes)
    objects.push_back(snapshot_block{one.address + covered, one.bytes - covered, 0, block_state::free});
  return objects;
}

}  // namespace

memory_snapshot device_cache::snapshot() {
  memory_snapshot snap;
  snap.device_count = device_ + 1;
  snap.max_split_size = settings_.conf.max_split_bytes == unlimited_bytes ? -1 : static_cast<std::int64_t>(settings_.conf.max_split_bytes);
  const std::uint64_t private_pool = private_pool_.load(std::memory_order_relaxed);
  layout_capture capture;
  bool uses_vmm = false;
  {
    std::lock_guard<std::mutex> lock(device_mutex_);  // Note [Snapshot outside the lock]: copies only
    uses_vmm = large_->uses_vmm();
    live_blocks_.for_each([&](std::uintptr_t address, const live_block& block) {
      if (block.cache != this) return;  // another device, or a private pool's cache
      if (block.owner != nullptr) capture.small_requested.emplace_back(address, block.requested_bytes);
      else if (block.freeing)  // Note [Frees in flight]: on its way back to the pool
        capture.large.push_back(snapshot_block{address, block.size_bytes, 0, block_state::pending_free});
      else capture.large.push_back(snapshot_block{address, block.size_bytes, block.requested_bytes, block_state::allocated});
    });
    for (const pending_large& pending : pending_large_)
      capture.large.push_back(snapshot_block{pending.address, pending.size_bytes, 0, block_state::pending_free});
    // Free ranges, clipped to reserved memory (unmapped address space is not memory). Any
    // byte of a region that is neither live, pending, slab nor free shows up as a gap,
    // which check_snapshot() reports.
    capture.regions = large_->reserved_regions();
    const std::vector<reserved_region>& regions = capture.regions;
    large_->index().for_each_extent([&](std::uintptr_t range_address, std::size_t range_bytes) {
      auto at = std::upper_bound(regions.begin(), regions.end(), range_address,
                                 [](std::uintptr_t value, const reserved_region& r) { return value < r.address; });
      if (at != regions.begin()) --at;
      for (; at != regions.end() && at->address < range_address + range_bytes; ++at) {
        const std::uintptr_t start = std::max(range_address, at->address);
        const std::uintptr_t end = std::min(range_address + range_bytes, at->address + at->size_bytes);
        if (start < end) capture.large.push_back(snapshot_block{start, end - start, 0, block_state::free});
      }
    });
    for (const reserved_region& cached : large_->cached_dedicated_regions())  // Note [Dedicated mappings]
      capture.large.push_back(snapshot_block{cached.address, cached.size_bytes, 0, block_state::free});
    // Note [Consistent snapshots] (fragless-stats' snapshot_commands.cpp; this is the
    // process's part): a slab's objects are read under its shard's lock, from the slab
    // itself -- free slots, pending objects, and every other object allocated -- so a
    // thread between a slab and the live-block map (allocating or freeing right now)
    // cannot tear the slab's picture; the live map only gives requested sizes (an object
    // on its way in or out shows its own size).
    std::shared_lock<std::shared_mutex> shards_lock(shards_mutex_);
    for (auto& [stream, shard] : shards_) {
      std::lock_guard<spin_lock> shard_lock(shard->mutex());
      std::unordered_map<const slab*, std::size_t> slab_at;  // the shard's slabs in capture.slabs
      shard->for_each_slab([&](const slab& one) {
        slab_at.emplace(&one, capture.slabs.size());
        capture.slabs.push_back(captured_slab{one.address, one.bytes, shard->stream(), one.class_index, one.capacity,
                                              one.free_slots, {}});
      });
      for (const pending_object& pending : shard->pending())
        if (auto found = slab_at.find(pending.owner); found != slab_at.end())
          capture.slabs[found->second].pending.emplace_back(pending.slot, pending.size_bytes);
    }
  }
  // The layout is captured; the rest runs without a lock.
  // Large blocks by address; where two start at one address, the first captured is kept.
  std::vector<snapshot_block>& large_blocks = capture.large;
  std::stable_sort(large_blocks.begin(), large_blocks.end(),
                   [](const snapshot_block& a, const snapshot_block& b) { return a.address < b.address; });
  large_blocks.erase(std::unique(large_blocks.begin(), large_blocks.end(),
                                 [](const snapshot_block& a, const snapshot_block& b) { return a.address == b.address; }),
                     large_blocks.end());
  const std::unordered_map<std::uintptr_t, std::size_t> small_requested(capture.small_requested.begin(),
                                                                         capture.small_requested.end());
  std::sort(capture.slabs.begin(), capture.slabs.end(),
            [](const captured_slab& a, const captured_slab& b) { return a.address < b.address; });
  // Large segments: each reserved region, cut at the slabs inside it.
  for (const reserved_region& region : capture.regions) {
    std::uintptr_t piece_start = region.address;
    const std::uintptr_t region_end = region.address + region.size_bytes;
    auto emit_piece = [&](std::uintptr_t piece_end) {
      if (piece_end <= piece_start) return;
      snapshot_segment segment;
      segment.device = device_;
      segment.private_pool = private_pool;
      segment.address = piece_start;
      segment.size_bytes = piece_end - piece_start;
      segment.pool = pool_large;
      segment.is_expandable = uses_vmm;
      auto at = std::lower_bound(large_blocks.begin(), large_blocks.end(), piece_start,
                                 [](const snapshot_block& block, std::uintptr_t value) { return block.address < value; });
      for (; at != large_blocks.end() && at->address < piece_end; ++at) segment.blocks.push_back(*at);
      snap.segments.push_back(std::move(segment));
    };
    auto slab = std::lower_bound(capture.slabs.begin(), capture.slabs.end(), region.address,
                                 [](const captured_slab& one, std::uintptr_t value) { return one.address < value; });
    for (; slab != capture.slabs.end() && slab->address < region_end; ++slab) {
      emit_piece(slab->address);
      piece_start = slab->address + slab->bytes;
    }
    emit_piece(region_end);
  }
  for (const captured_slab& one : capture.slabs) {
    snapshot_segment segment;
    segment.device = device_;
    segment.private_pool = private_pool;
    segment.address = one.address;
    segment.size_bytes = one.bytes;
    segment.stream = stream_number(one.stream);
    segment.pool = pool_small;
    segment.is_expandable = false;
    segment.blocks = slab_objects(one, small_requested);
    snap.segments.push_back(std::move(segment));
  }
  std::sort(snap.segments.begin(), snap.segments.end(),
            [](const snapshot_segment& a, const snapshot_segment& b) { return a.address < b.address; });
  return snap;
}

}  // namespace fragless::core
