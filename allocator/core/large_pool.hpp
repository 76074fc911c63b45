// The large pool of one device: where every block the size classes do not serve lives,
// and where slabs come from. Two ways to get device memory, chosen at start:
//  - VMM (default where supported): one large reserved virtual range; blocks are packed
//    best-fit, address-ordered, at 512 B granularity inside it; 2 MiB physical pages are
//    mapped under a block when it needs them (Note [Page cache]).
//  - cudaMalloc: PyTorch-like segments (2 MiB for <= 1 MiB, 20 MiB for < 10 MiB, else the
//    size rounded to 2 MiB); only whole free segments are ever released.
// Invariant: every live block lies in reserved memory (mapped pages / a live segment); the
// free index holds exactly the address space that is neither live nor pending.
// Not thread-safe: the device cache holds the device lock around every call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "backend/backend.hpp"
#include "core/event_pool.hpp"
#include "core/free_index.hpp"
#include "core/page_map.hpp"

namespace fragless::core {

// Note [Page cache]
// "Reserved bytes" in VMM mode are the mapped physical pages. A page stays mapped while
// any live block touches it. When its last block goes, it stays mapped as a cache and is
// reused in place by the next block placed there. Only when a block needs a page where
// none is mapped -- reserved memory would grow -- is a cached free page elsewhere moved
// (unmapped and its physical handle mapped at the new place, no cuMemCreate), and only if
// no stream may still touch it (checked with a pooled event, never by blocking). Cached
// pages are released for good by empty_cache(), trim() and the OOM path, all of which
// synchronize the device first.

// Device-call counters of a large pool (the device cache folds them into the stats).
struct large_pool_counters {
  std::int64_t device_alloc = 0;  // cuMemCreate / cudaMalloc calls that succeeded
  std::int64_t device_free = 0;   // cuMemRelease / cudaFree calls
  std::int64_t map = 0;
  std::int64_t unmap = 0;
  std::int64_t map_ns = 0;
  std::int64_t unmap_ns = 0;
  std::int64_t page_moves = 0;
  std::int64_t cross_stream_waits = 0;
  std::int64_t device_syncs = 0;  // fallback synchronizations (Note [Stream reuse])
};

// A reserved region as the snapshot shows it: a cudaMalloc segment, or a run of mapped pages.
struct reserved_region {
  std::uintptr_t address;
  std::size_t size_bytes;
};

class large_pool {
 public:
  large_pool(backend::backend& device_backend, int device, event_pool& events);
  ~large_pool();
  large_pool(const large_pool&) = delete;
  large_pool& operator=(const large_pool&) = delete;

  // Chooses the mode; VMM needs the backend's support and a reserved range of
  // `range_bytes`. Returns the backend status of the failed step, if any.
  backend::status initialize(bool want_vmm, std::size_t range_bytes) noexcept;
  bool uses_vmm() const noexcept { return uses_vmm_; }

  // Places a block of `size_bytes` (a multiple of 512) for `stream`. On success the block
  // is live, backed by reserved memory, and `stream` is ordered after every other stream
  // that may still touch it. out_of_memory: no room within the device or the limit.
  backend::status allocate(std::size_t size_bytes, stream_id stream, std::uintptr_t* address) noexcept;
  // Returns a block to the free index; `streams` may still have work touching it.
  void release(std::uintptr_t address, std::size_t size_bytes, const stream_set& streams) noexcept;

  // Precondition for both: the device was synchronized and forget_streams() called.
  // Gives back cached memory (free pages / whole free segments) until at most
  // `bytes_to_keep` of it is left. Returns the bytes released.
  std::size_t release_cached(std::size_t bytes_to_keep) noexcept;
  void forget_streams() noexcept { index_.forget_streams(); }

  void set_reserved_limit(std::size_t limit_bytes) noexcept { reserved_limit_bytes_ = limit_bytes; }
  std::size_t reserved_limit_bytes() const noexcept { return reserved_limit_bytes_; }
  // Test-only: reuse across streams without ordering (Note [Stream reuse]).
  void set_skip_stream_waits(bool skip) noexcept { skip_stream_waits_ = skip; }
  std::size_t reserved_bytes() const noexcept;
  std::size_t device_segment_count() const noexcept;
  // Reserved memory no live block touches (whole free pages / whole free segments).
  std::size_t cached_free_bytes() const noexcept;
  // Largest free block that could be handed out without growing reserved memory.
  std::size_t largest_free_reserved_bytes() const noexcept;
  const large_pool_counters& counters() const noexcept { return counters_; }
  const free_index& index() const noexcept { return index_; }
  const page_map& pages() const noexcept { return pages_; }
  std::vector<reserved_region> reserved_regions() const;

 private:
  backend::status allocate_vmm(std::size_t size_bytes, stream_id stream, std::uintptr_t* address);
  backend::status allocate_segment(std::size_t size_bytes, stream_id stream, std::uintptr_t* address);
  backend::status order_after_streams(const free_range& range, stream_id stream) noexcept;
  backend::status map_missing_pages(std::uintptr_t address, std::size_t size_bytes) noexcept;
  bool take_cached_page(std::size_t first, std::size_t end, backend::physical_handle* handle) noexcept;
  backend::status map_page(std::size_t page, backend::physical_handle handle) noexcept;
  void unmap_page(std::size_t page) noexcept;
  std::size_t release_cached_pages(std::size_t bytes_to_keep) noexcept;
  std::size_t release_cached_segments(std::size_t bytes_to_keep) noexcept;
  // Releases a physical handle, or keeps it for a later retry when the release fails.
  void release_handle(backend::physical_handle handle) noexcept;

  backend::backend& backend_;
  int device_;
  event_pool& events_;
  bool uses_vmm_ = false;
  bool skip_stream_waits_ = false;
  free_index index_;
  std::size_t reserved_limit_bytes_ = SIZE_MAX;
  large_pool_counters counters_;
  // VMM mode
  std::uintptr_t range_base_ = 0;
  std::size_t range_bytes_ = 0;
  page_map pages_;
  std::vector<backend::physical_handle> unreleased_;  // releases that failed, retried later
  // cudaMalloc mode: segment base -> size
  std::map<std::uintptr_t, std::size_t> segments_;
  std::size_t segment_bytes_ = 0;
  std::uint64_t next_segment_id_ = 1;
};

}  // namespace fragless::core
