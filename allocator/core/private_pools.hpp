// Private pools: caches of their own, beside each device's cache, whose blocks are never
// reused by allocations outside the pool (CUDA graph capture, torch.cuda.MemPool).
// Invariant: a pool's cache object lives as long as the allocator -- blocks carry a
// pointer to it (live_block::cache) and may be freed long after the pool was released --
// so a released pool's cache is recycled for a later pool of its device once no block of
// it is active, never destroyed.
//
// Note [Private pools]
// A pool is a device_cache of its own: its own virtual range (vmm) or segments
// (cudaMalloc), shards, pending frees and stats. Blocks placed there can only go back to
// that cache (deallocate routes by the block's cache), so nothing outside the pool ever
// reuses its memory, and everything inside a cache (stream reuse, compaction, page
// moves, stitching) works unchanged within the pool.
//  - create_pool(device) -> id; allocate_from_pool(id, ...); release_pool(id) ends the
//    pool: no new allocations; its blocks still free normally; once none is active, the
//    cache (and whatever memory it still caches) serves the next pool created on the
//    device. empty_cache / compact / trim of a device cover its pools' caches too;
//    empty_cache_keeping_live_pools leaves live pools' caches alone (PyTorch's rule).
//  - Memory pressure crosses pools: an allocation that runs out of memory in one cache
//    releases the cached (free, idle) memory of the device's other caches and retries
//    once (allocator::allocate_in).
//  - Stats of a device are the sum over its caches (Note [Summed stats]); the snapshot
//    concatenates them, each segment tagged with its pool.
//  - A memory fraction (set_memory_fraction, also applied to pools created later) and
//    max_cached_bytes cap each cache, not their sum.
//  - An out-of-memory in one cache releases the others' unused memory and retries, so a
//    pool's free memory always ends up usable outside it (PyTorch's use_on_oom pools get
//    the same effect by allocating from the pool's free blocks).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/device_cache.hpp"

namespace fragless::core {

class private_pools {
 public:
  private_pools(backend::backend& device_backend, live_block_map& live_blocks, const cache_settings& settings);
  ~private_pools();
  private_pools(const private_pools&) = delete;
  private_pools& operator=(const private_pools&) = delete;

  // A new pool on the device (recycling a released pool's idle cache when there is one).
  // @throws device_error
  std::uint64_t create(int device);
  // The cache of a pool that has not been released. @throws invalid_argument_error
  device_cache& cache_of(std::uint64_t pool);
  // Ends the pool (never throws; unknown ids are ignored). Its blocks free as usual.
  void release(std::uint64_t pool) noexcept;
  // Calls f(device_cache&) for every pool cache of the device (live, released, idle),
  // holding the registry lock: f must not call back into the registry.
  template <typename F>
  void for_each(int device, F&& f) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& one : entries_)
      if (one->device == device) f(*one->cache);
  }
  // Calls f(device_cache&) for every released pool cache of the device, like for_each.
  template <typename F>
  void for_each_released(int device, F&& f) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& one : entries_)
      if (one->device == device && one->pool == 0) f(*one->cache);
  }
  bool empty() const noexcept { return count_.load(std::memory_order_acquire) == 0; }

 private:
  struct entry {
    int device = 0;
    std::uint64_t pool = 0;  // 0: released
    std::unique_ptr<device_cache> cache;
  };

  backend::backend& backend_;
  live_block_map& live_blocks_;
  const cache_settings settings_;
  std::mutex mutex_;  // guards everything below
  std::vector<std::unique_ptr<entry>> entries_;  // never shrinks (see the invariant above)
  std::unordered_map<std::uint64_t, entry*> live_;
  std::uint64_t next_pool_ = 1;
  std::atomic<std::size_t> count_{0};  // entries_.size(), readable without the lock
};

}  // namespace fragless::core
