// Field-by-field conversion of fragless stats and snapshots into c10's structs.
#include "c10_conversion.hpp"

namespace fragless::torch {
namespace {

c10::CachingAllocator::Stat to_c10(const stat& from) {
  c10::CachingAllocator::Stat to;
  to.current = from.current;
  to.peak = from.peak;
  to.allocated = from.allocated;
  to.freed = from.freed;
  return to;
}

c10::CachingAllocator::StatArray to_c10(const pool_stat& from) {
  c10::CachingAllocator::StatArray to;
  // Both sides use PyTorch's StatType order: all (aggregate), small_pool, large_pool.
  for (std::size_t pool = 0; pool < from.size(); ++pool) to[pool] = to_c10(from[pool]);
  return to;
}

}  // namespace

c10::CachingDeviceAllocator::DeviceStats to_c10(const device_stats& stats) {
  c10::CachingDeviceAllocator::DeviceStats to;
  to.allocation = to_c10(stats.allocation);
  to.segment = to_c10(stats.segment);
  to.active = to_c10(stats.active);
  to.inactive_split = to_c10(stats.inactive_split);
  to.allocated_bytes = to_c10(stats.allocated_bytes);
  to.reserved_bytes = to_c10(stats.reserved_bytes);
  to.active_bytes = to_c10(stats.active_bytes);
  to.inactive_split_bytes = to_c10(stats.inactive_split_bytes);
  to.requested_bytes = to_c10(stats.requested_bytes);
  to.num_alloc_retries = stats.num_alloc_retries;
  to.num_ooms = stats.num_ooms;
  to.oversize_allocations = to_c10(stats.oversize_allocations);
  to.oversize_segments = to_c10(stats.oversize_segments);
  to.num_sync_all_streams = stats.num_sync_all_streams;
  to.num_device_alloc = stats.num_device_alloc;
  to.num_device_free = stats.num_device_free;
#if FRAGLESS_TORCH_HAS_OOM_REJECTIONS
  to.num_oom_rejections = 0;  // fragless has no pre-emptive OOM policy (Note [Torch versions])
#endif
  to.max_split_size = stats.max_split_size;
  // reserved_bytes_by_private_pools stays empty: fragless has no private pools (Note [Private pools]).
  return to;
}

std::vector<c10::CachingDeviceAllocator::SegmentInfo> to_c10_segments(const memory_snapshot& snapshot) {
  std::vector<c10::CachingDeviceAllocator::SegmentInfo> segments;
  segments.reserve(snapshot.segments.size());
  for (const snapshot_segment& from : snapshot.segments) {
    c10::CachingDeviceAllocator::SegmentInfo to;
    to.device = static_cast<c10::DeviceIndex>(from.device);
    to.address = static_cast<std::size_t>(from.address);
    to.total_size = static_cast<std::size_t>(from.size_bytes);
    to.stream = reinterpret_cast<void*>(static_cast<std::uintptr_t>(from.stream));
    to.is_large = from.pool == pool_large;
    to.is_expandable = from.is_expandable;
    to.blocks.reserve(from.blocks.size());
    for (const snapshot_block& block : from.blocks) {
      c10::CachingDeviceAllocator::BlockInfo info;
      info.size = static_cast<std::size_t>(block.size_bytes);
      info.requested_size = static_cast<std::size_t>(block.requested_bytes);
      info.allocated = block.state == block_state::allocated;
      info.active = block.state != block_state::free;
      if (info.allocated) {
        to.allocated_size += info.size;
        to.requested_size += info.requested_size;
      }
      if (info.active) to.active_size += info.size;
      to.blocks.push_back(std::move(info));
    }
    segments.push_back(std::move(to));
  }
  return segments;
}

}  // namespace fragless::torch
