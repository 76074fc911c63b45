// The large pool of one device: where every block the size classes do not serve lives,
// and where slabs come from. One interface, two modes, chosen once at start (create()):
//  - vmm_pool (core/vmm_pool.hpp; default where the device supports it): one large
//    reserved virtual range, blocks placed best-fit inside it and 2 MiB physical pages
//    mapped under them as needed, plus dedicated and stitched mappings, compaction, growth
//    rules and loop plans;
//  - segment_pool (core/segment_pool.hpp): PyTorch-like cudaMalloc segments, released only
//    whole.
// What both share lives here: the free index (address space neither live nor pending),
// stream ordering on reuse (Note [Stream reuse]), the reserved limit and the device-call
// counters.
// Invariant: every live block lies in reserved memory; the free index holds exactly the
// address space of the pool that is neither live nor pending; reserved_bytes() is what
// reserved_regions() adds up to.
// Not thread-safe: the device cache holds the device lock around every call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "backend/backend.hpp"
#include "core/cache_settings.hpp"
#include "core/event_pool.hpp"
#include "core/free_index.hpp"
#include "core/loop_plan.hpp"

namespace fragless::core {

// Device-call counters of a large pool, one per row of core/stat_sources.def (the device
// cache folds them into the stats).
struct large_pool_counters {
#define FRAGLESS_LARGE_POOL_COUNTER(member, stat, description) std::int64_t member = 0;
#include "core/stat_sources.def"
};

// A reserved region as the snapshot shows it: a cudaMalloc segment, or a run of mapped pages.
struct reserved_region {
  std::uintptr_t address;
  std::size_t size_bytes;
};

// What a compaction pass may do (Note [Compaction]).
// A pass never takes memory whose remembered streams may still touch it; after a device
// synchronization forget_streams() leaves streams only on what was freed since
// (Note [Synchronized settle]).
struct compaction_pass {
  bool aged_only = false;           // only what stayed free through compaction_age_passes passes
  std::size_t bytes_to_keep = 0;    // cached free bytes (pages + cached mappings) left
};
struct compaction_outcome {
  std::size_t released_bytes = 0;  // reserved bytes given back to the device
  std::size_t unmapped_pages = 0;  // free pages unmapped
};

class large_pool {
 public:
  // Sets up the pool of `device` in the mode the settings ask for and the device supports
  // (VMM with a reserved range of `range_bytes`, else cudaMalloc segments). Null when host
  // memory for its bookkeeping is missing. `settings` and `events` must outlive the pool.
  static std::unique_ptr<large_pool> create(backend::backend& device_backend, int device, event_pool& events,
                                            const cache_settings& settings, std::size_t range_bytes) noexcept;
  virtual ~large_pool() = default;
  large_pool(const large_pool&) = delete;
  large_pool& operator=(const large_pool&) = delete;

  virtual bool uses_vmm() const noexcept = 0;

  // Places a block of `size_bytes` (a multiple of 512) for `stream`. On success the block
  // is live, backed by reserved memory, and `stream` is ordered after every other stream
  // that may still touch it. out_of_memory: no room within the device or the limit.
  // `placed_bytes`, if given, receives the block's size: more than `size_bytes` when a
  // whole oversize range was taken (Note [Max split size]).
  virtual backend::status allocate(std::size_t size_bytes, stream_id stream, std::uintptr_t* address,
                                   std::size_t* placed_bytes = nullptr) noexcept = 0;
  // Returns a block to the free index; `streams` may still have work touching it. False
  // when there was no host memory to index it: nothing changed, and the caller keeps the
  // block to release again later (Note [Pending without host memory]).
  virtual bool release(std::uintptr_t address, std::size_t size_bytes, const stream_set& streams) noexcept = 0;

  // Note [Compaction]. Only memory no stream it remembers can still touch goes.
  virtual compaction_outcome compact(const compaction_pass& pass) noexcept = 0;
  // After a device synchronization and forget_streams(): gives back cached memory (free
  // pages and mappings / whole free segments) until at most `bytes_to_keep` of it is
  // left -- all of it but what was freed after the synchronization and is still in use
  // (Note [Synchronized settle]). Returns the bytes released.
  std::size_t release_cached(std::size_t bytes_to_keep) noexcept;
  // No precondition (Note [Release threshold]): releases cached free pages / whole free
  // segments no stream can still touch until at most `bytes_to_keep` cached bytes are
  // left, without a device synchronization. Returns the bytes released.
  std::size_t release_idle_cached(std::size_t bytes_to_keep) noexcept;
  // After a device synchronization: free memory remembers no stream (free ranges, and
  // cached dedicated mappings in VMM mode).
  virtual void forget_streams() noexcept { index_.forget_streams(); }
  // Note [Retired streams]: `from` becomes `to` wherever free memory remembers it (free
  // ranges, cached dedicated mappings). Returns whether any did. May allocate host memory.
  virtual bool rename_stream(stream_id from, stream_id to);
  // Starts a new compaction epoch (Note [Compaction]); nothing to age in cudaMalloc mode.
  virtual void advance_epoch() noexcept {}

  // Note [Loop plans] (VMM mode only): the plan's counters; all zero in cudaMalloc mode.
  virtual const loop_plan_counters& loop_plan_counts() const noexcept;
  // Note [Loop plans] (VMM mode only): a plan about to start wants the owner's empty slabs
  // back first; room_given() says they were returned, and the plan starts or waits.
  virtual bool plan_wants_room() const noexcept { return false; }
  virtual void room_given() noexcept {}
  // Allocations made while one exists are neither recorded nor planned (slabs).
  class unplanned_scope {
   public:
    explicit unplanned_scope(large_pool& pool) noexcept : pool_(pool) { ++pool_.unplanned_scopes_; }
    ~unplanned_scope() { --pool_.unplanned_scopes_; }
    unplanned_scope(const unplanned_scope&) = delete;
    unplanned_scope& operator=(const unplanned_scope&) = delete;

   private:
    large_pool& pool_;
  };
  // The limit in force (max_cached_bytes, lowered by set_memory_fraction and, for one
  // attempt, by the garbage collection of Note [Release threshold]).
  void set_reserved_limit(std::size_t limit_bytes) noexcept { reserved_limit_bytes_ = limit_bytes; }
  std::size_t reserved_limit_bytes() const noexcept { return reserved_limit_bytes_; }
  virtual std::size_t reserved_bytes() const noexcept = 0;
  virtual std::size_t device_segment_count() const noexcept = 0;
  // Reserved memory no live block touches (whole free pages and cached mappings / whole
  // free segments).
  virtual std::size_t cached_free_bytes() const noexcept = 0;
  // Largest free block that could be handed out without growing reserved memory.
  virtual std::size_t largest_free_reserved_bytes() const noexcept = 0;
  // The bytes an explicit compaction pass leaves cached (Note [Compaction]).
  virtual std::size_t cached_pages_kept_bytes() const noexcept { return 0; }
  // Physical pages mapped (VMM mode; 0 in cudaMalloc mode).
  virtual std::size_t mapped_page_count() const noexcept { return 0; }
  const large_pool_counters& counters() const noexcept { return counters_; }
  const free_index& index() const noexcept { return index_; }
  virtual std::vector<reserved_region> reserved_regions() const = 0;
  // Dedicated mappings no block uses (cached free memory), by address; none in cudaMalloc mode.
  virtual std::vector<reserved_region> cached_dedicated_regions() const { return {}; }

  // Note [IPC sharing]: the physical allocations under [address, address + bytes), in
  // address order -- pages of the shared range, a dedicated mapping's one handle, a
  // stitched mapping's pages (vmm), or the whole cudaMalloc segment (handle 0). Empty when
  // some byte of the range is not backed (not a live block's memory).
  struct shared_piece {
    std::uintptr_t base = 0;
    std::size_t bytes = 0;
    backend::physical_handle handle = 0;
  };
  virtual std::vector<shared_piece> shared_pieces(std::uintptr_t address, std::size_t bytes) const = 0;
  // VMM mode: makes the unmaps deferred so far (Note [Dormant mappings] in
  // vmm_pool_dormant.cpp), so that no later placement needs one while a capture refuses it.
  virtual void unmap_dormant_ranges() noexcept {}

 protected:
  large_pool(backend::backend& device_backend, int device, event_pool& events, const cache_settings& settings);

  // Note [Capture underway]: while a capture may be running, memory last used by other
  // streams is not reused (no cross-stream event wait is made): fresh memory is used instead.
  bool wait_forbidden(const stream_set& streams, stream_id stream) const noexcept;
  // Note [Stream reuse]: orders `stream` after every other stream of a free range's `streams`.
  backend::status order_after_streams(const stream_set& streams, stream_id stream) noexcept;
  // Note [Standing waits]: `streams` with every stream's free stamped now (release paths).
  // May throw std::bad_alloc (a set of more than two streams is copied).
  stream_set freed_now(const stream_set& streams);
  // Is the free range at `address` one no stream can still touch? Makes it clean (forgets
  // its streams) when every remembered stream is idle now.
  bool make_range_idle(std::uintptr_t address) noexcept;
  // Has every stream in `streams` finished the work queued so far (pooled event queries)?
  bool streams_idle(const stream_set& streams) noexcept;

  backend::backend& backend_;
  int device_;
  event_pool& events_;
  const cache_settings& settings_;
  free_index index_;
  std::size_t reserved_limit_bytes_;
  large_pool_counters counters_;
  // Open unplanned_scopes (Note [Loop plans]; read by vmm_pool only).
  int unplanned_scopes_ = 0;
};

}  // namespace fragless::core
