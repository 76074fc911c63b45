// The large pool of one device: where every block the size classes do not serve lives,
// and where slabs come from. Two ways to get device memory, chosen at start:
//  - VMM (default where supported): one large reserved virtual range; blocks are placed
//    best-fit at 512 B granularity inside it, at the end of their range that needs fewer
//    new pages (Note [Placement]); physical pages are mapped under a block when it needs
//    them (Note [Page cache]), a run of missing pages as one chunk (Note [Physical chunks]). Very large requests get a range and mapping of their own instead
//    (Note [Dedicated mappings]), and so does a request no free range can hold
//    (Note [Stitching]). Free pages are given back by compaction passes (Note [Compaction]);
//    idle cached mappings also before reserved memory passes its high-water mark
//    (Note [Growth]), and page moves may be budgeted (Note [Move budget]).
//    A repeating loop's step can be laid out once and followed (Note [Loop plans]).
//  - cudaMalloc: PyTorch-like segments (Note [Segment sizes]); only whole free segments
//    are ever released.
// Invariant: every live block lies in reserved memory (mapped pages / a live segment / a
// dedicated mapping); the free index holds exactly the address space of the shared range
// or segments that is neither live nor pending; a dedicated mapping holds one block or is
// wholly cached; reserved bytes = mapped pages + dedicated/stitched mappings, so a
// snapshot's regions add up to them.
// Not thread-safe: the device cache holds the device lock around every call.
// Code (each file holds the notes it implements): large_pool.cpp (set-up, entry points,
// stream ordering, release), large_pool_pages.cpp (VMM placement, page cache, page moves),
// large_pool_segments.cpp (cudaMalloc segments), large_pool_mappings.cpp (dedicated and
// stitched mappings), large_pool_compaction.cpp, large_pool_plans.cpp (loop plans),
// large_pool_sharing.cpp (IPC pieces).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "backend/backend.hpp"
#include "core/cache_settings.hpp"
#include "core/event_pool.hpp"
#include "core/free_index.hpp"
#include "core/loop_plan.hpp"
#include "core/page_map.hpp"

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
struct compaction_pass {
  bool synchronized = false;        // the device was synchronized and forget_streams() called
  bool aged_only = false;           // only what stayed free through compaction_age_passes passes
  std::size_t bytes_to_keep = 0;    // cached free bytes (pages + cached mappings) left
};
struct compaction_outcome {
  std::size_t released_bytes = 0;  // reserved bytes given back to the device
  std::size_t unmapped_pages = 0;  // free pages unmapped
};

// Note [Compaction]: free pages an explicit pass keeps.
constexpr std::size_t kCachedPagesKept = 4;

class large_pool {
 public:
  // Reads its options from `settings` (which must outlive the pool) for its whole life.
  large_pool(backend::backend& device_backend, int device, event_pool& events, const cache_settings& settings);
  ~large_pool();
  large_pool(const large_pool&) = delete;
  large_pool& operator=(const large_pool&) = delete;

  // Chooses the mode (settings.wants_vmm(); VMM needs the backend's support and a reserved
  // range of `range_bytes`). Returns the backend status of the failed step, if any.
  backend::status initialize(std::size_t range_bytes) noexcept;
  bool uses_vmm() const noexcept { return uses_vmm_; }

  // Places a block of `size_bytes` (a multiple of 512) for `stream`. On success the block
  // is live, backed by reserved memory, and `stream` is ordered after every other stream
  // that may still touch it. out_of_memory: no room within the device or the limit.
  // `placed_bytes`, if given, receives the block's size: more than `size_bytes` when a
  // whole oversize range was taken (Note [Max split size]).
  backend::status allocate(std::size_t size_bytes, stream_id stream, std::uintptr_t* address,
                           std::size_t* placed_bytes = nullptr) noexcept;
  // Returns a block to the free index; `streams` may still have work touching it.
  void release(std::uintptr_t address, std::size_t size_bytes, const stream_set& streams) noexcept;

  // Note [Compaction]. Without pass.synchronized only memory no stream can still touch
  // goes; with it (precondition: device synchronized, forget_streams() called) all of it.
  compaction_outcome compact(const compaction_pass& pass) noexcept;
  // Precondition: the device was synchronized and forget_streams() called.
  // Gives back cached memory (free pages and mappings / whole free segments) until
  // at most `bytes_to_keep` of it is left. Returns the bytes released.
  std::size_t release_cached(std::size_t bytes_to_keep) noexcept;
  void forget_streams() noexcept { index_.forget_streams(); }
  // Note [Retired streams]: `from` becomes `to` wherever free memory remembers it (free
  // ranges, cached dedicated mappings). Returns whether any did. May allocate host memory.
  bool rename_stream(stream_id from, stream_id to);
  // No precondition (Note [Release threshold]): releases cached free pages / whole free
  // segments no stream can still touch until at most `bytes_to_keep` cached bytes are
  // left, without a device synchronization. Returns the bytes released.
  std::size_t release_idle_cached(std::size_t bytes_to_keep) noexcept;
  // Starts a new compaction epoch (Note [Compaction]).
  void advance_epoch() noexcept { pages_.advance_epoch(); }

  const loop_plan_counters& loop_plan_counts() const noexcept { return plan_.counters(); }
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
  bool loop_plan_active() const noexcept { return plan_.active(); }
  // Note [Page moves]: pages that may be mapped before missing ones are moved, not created.
  std::size_t growth_allowance_pages() const noexcept;
  // The limit in force (max_cached_bytes, lowered by set_memory_fraction and, for one
  // attempt, by the garbage collection of Note [Release threshold]).
  void set_reserved_limit(std::size_t limit_bytes) noexcept { reserved_limit_bytes_ = limit_bytes; }
  std::size_t reserved_limit_bytes() const noexcept { return reserved_limit_bytes_; }
  std::size_t reserved_bytes() const noexcept;
  std::size_t device_segment_count() const noexcept;
  // Reserved memory no live block touches (whole free pages and cached mappings / whole
  // free segments).
  std::size_t cached_free_bytes() const noexcept;
  // Largest free block that could be handed out without growing reserved memory.
  std::size_t largest_free_reserved_bytes() const noexcept;
  const large_pool_counters& counters() const noexcept { return counters_; }
  const free_index& index() const noexcept { return index_; }
  const page_map& pages() const noexcept { return pages_; }
  std::vector<reserved_region> reserved_regions() const;
  // Dedicated mappings no block uses (cached free memory), by address.
  std::vector<reserved_region> cached_dedicated_regions() const;

  // Note [IPC sharing]: the physical allocations under [address, address + bytes), in
  // address order -- pages of the shared range, a dedicated mapping's one handle, a
  // stitched mapping's pages (vmm), or the whole cudaMalloc segment (handle 0). Empty when
  // some byte of the range is not backed (not a live block's memory).
  struct shared_piece {
    std::uintptr_t base = 0;
    std::size_t bytes = 0;
    backend::physical_handle handle = 0;
  };
  std::vector<shared_piece> shared_pieces(std::uintptr_t address, std::size_t bytes) const;

 private:
  backend::status allocate_vmm(std::size_t size_bytes, stream_id stream, std::uintptr_t* address,
                               std::size_t* placed_bytes);
  // Note [Loop plans]: places a block at `address` in the plan's range if that place is
  // free and usable from `stream`; `*placed` says whether it was.
  backend::status allocate_planned(std::uintptr_t address, std::size_t size_bytes, stream_id stream, bool* placed);
  // Maps what [address, address + size_bytes) lacks, orders `stream` after `range`'s
  // streams and makes the block live there. `planned`: pages are moved before created.
  backend::status place_block(std::uintptr_t address, std::size_t size_bytes, const free_range& range,
                              stream_id stream, bool planned);
  // Note [Loop plans]: reserves the pending plan's range, or rejects the plan.
  void start_plan() noexcept;
  // Note [Loop plans]: gives an inactive plan's range back to ordinary placement.
  void dissolve_plan_range() noexcept;
  // Note [Loop plans]: after each recorded event, starts a plan that reached its first
  // planned event, or dissolves the range of one just abandoned.
  void after_plan_event() noexcept {
    if (plan_.plan_pending()) start_plan();
    if (plan_range_bytes_ != 0 && !plan_.active()) dissolve_plan_range();
  }
  bool in_plan_range(std::uintptr_t address) const noexcept {
    return address - plan_base_ < plan_range_bytes_;
  }
  // Note [Placement]: the address for a block of `size_bytes` and the free range holding it.
  std::optional<std::pair<std::uintptr_t, free_range>> choose_placement(std::size_t size_bytes) const;
  // Note [Placement]: whether a live block of `size_bytes` ends at `address` / starts at it.
  bool block_of_size_ends_at(std::uintptr_t address, std::size_t size_bytes) const noexcept;
  bool block_of_size_starts_at(std::uintptr_t address, std::size_t size_bytes) const noexcept;
  // Note [Stitching]
  backend::status allocate_stitched(std::size_t size_bytes, stream_id stream, std::uintptr_t* address,
                                    std::size_t* placed_bytes);
  // A physical page for a new mapping: an idle free page outside pages [first, end) (a page
  // move), or a new one within the reserved limit.
  // `move_first`: try a move before creating, whatever the allowance (Note [Loop plans]).
  backend::status take_page(std::size_t first, std::size_t end, bool move_first,
                            backend::physical_handle* handle) noexcept;
  // Note [Physical chunks]: physical memory for the run of `run_pages` missing pages from
  // page `at` (SIZE_MAX: a stitch's page, `run_pages` 1) of a block touching pages
  // [first, end): a created or moved chunk of *chunk_pages pages, to be mapped at `at`.
  backend::status take_chunk(std::size_t at, std::size_t run_pages, std::size_t first, std::size_t end,
                             bool move_first, backend::physical_handle* handle, std::size_t* chunk_pages) noexcept;
  backend::status create_physical_chunk(std::size_t pages, backend::physical_handle* handle,
                                        std::size_t* chunk_pages) noexcept;
  std::size_t chunk_cap_pages() const noexcept;
  bool take_cached_chunk(std::size_t at, std::size_t run_pages, std::size_t first, std::size_t end,
                         backend::physical_handle* handle, std::size_t* chunk_pages) noexcept;
  bool make_chunk_idle(std::size_t head) noexcept;
  // Reuses a cached dedicated/stitched mapping of exactly `bytes`, if any.
  bool reuse_mapping(std::size_t bytes, stream_id stream, std::uintptr_t* address, backend::status* result) noexcept;
  void compact_pages(const compaction_pass& pass, std::size_t* mapped_cached, std::size_t* unmapped_pages) noexcept;
  std::size_t mapped_cached_bytes() const noexcept {
    return pages_.cached_free_pages().size() * pages_.page_bytes() + dedicated_cached_bytes_;
  }
  backend::status allocate_segment(std::size_t size_bytes, stream_id stream, std::uintptr_t* address,
                                   std::size_t* placed_bytes);
  // Note [Capture underway]: while a capture may be running, memory last used by other
  // streams is not reused (no cross-stream event wait is made): fresh memory is used instead.
  bool wait_forbidden(const stream_set& streams, stream_id stream) const noexcept;
  backend::status order_after_streams(const free_range& range, stream_id stream) noexcept;
  backend::status map_missing_pages(std::uintptr_t address, std::size_t size_bytes, bool move_first = false) noexcept;
  // Is the free range at `address` one no stream can still touch? Makes it clean (forgets
  // its streams) when every remembered stream is idle now.
  bool make_range_idle(std::uintptr_t address) noexcept;
  // Has every stream in `streams` finished the work queued so far (pooled event queries)?
  bool streams_idle(const stream_set& streams) noexcept;
  std::size_t segment_size_for(std::size_t size_bytes) const noexcept;
  backend::status allocate_dedicated(std::size_t size_bytes, stream_id stream, std::uintptr_t* address,
                                     std::size_t* placed_bytes);
  // Unmaps one cached dedicated/stitched mapping and releases its handles; false (and
  // kept, possibly smaller) if a call fails.
  bool release_dedicated(std::uintptr_t base) noexcept;
  // Releases cached dedicated/stitched mappings (only idle ones unless pass.synchronized,
  // only aged ones with pass.aged_only) while more than pass.bytes_to_keep bytes are
  // cached; `cached` is updated.
  void release_dedicated_mappings(const compaction_pass& pass, std::size_t* cached) noexcept;
  // cudaMalloc mode best fit under Note [Max split size].
  std::optional<free_range> segment_fit(std::size_t size_bytes) const;
  // Maps `handle` over pages [first, first + count) as one chunk (Note [Physical chunks]).
  backend::status map_chunk(std::size_t first, std::size_t count, backend::physical_handle handle) noexcept;
  // cudaMalloc mode: releases whole free segments (idle ones unless `synchronized`).
  std::size_t release_cached_segments(std::size_t bytes_to_keep, bool synchronized) noexcept;
  // Releases a physical handle, or keeps it for a later retry when the release fails.
  void release_handle(backend::physical_handle handle) noexcept;
  // Note [Growth]: before reserved memory grows by `bytes`, gives back idle cached
  // dedicated/stitched mappings while the growth would pass the high-water mark.
  void make_room_for_growth(std::size_t bytes) noexcept;
  // Note [Growth]: records reserved memory after it grew.
  void note_growth() noexcept { reserved_high_water_bytes_ = std::max(reserved_high_water_bytes_, reserved_bytes()); }
  // Note [Growth]: a huge request goes to the shared range instead of a mapping of its own
  // when no cached mapping fits it exactly and a new one would pass the high-water mark
  // while the shared range's free pages could hold it.
  bool huge_block_fits_shared_pages(std::size_t size_bytes) noexcept;
  // Note [Move budget]: may a missing page be moved now rather than created?
  bool move_within_budget() const noexcept;

  backend::backend& backend_;
  int device_;
  event_pool& events_;
  const cache_settings& settings_;
  bool uses_vmm_ = false;
  // Note [Compaction]: automatic passes take only what stayed free through this many passes.
  const std::uint32_t compaction_age_passes_;
  // Note [Compaction]: whether memory free since `free_since_epoch` may go in an aged pass.
  bool old_enough(std::uint32_t free_since_epoch) const noexcept {
    return pages_.epoch() - free_since_epoch >= compaction_age_passes_;
  }
  free_index index_;
  std::size_t reserved_limit_bytes_;
  large_pool_counters counters_;
  // VMM mode
  std::uintptr_t range_base_ = 0;
  std::size_t range_bytes_ = 0;
  page_map pages_;
  // Blocks placed in the shared range, start -> size and loop-plan sequence: placement
  // hints only (Note [Placement], Note [Loop plans]); a block missing here (no host memory
  // when it was placed) is harmless.
  struct placed_block {
    std::size_t size_bytes;
    std::uint64_t sequence;
  };
  std::map<std::uintptr_t, placed_block> placed_blocks_;
  // Note [Loop plans]: the plan and its address range (a free-index segment of its own).
  static constexpr std::uint64_t kPlanSegmentId = 1;
  loop_plan plan_;
  std::uintptr_t plan_base_ = 0;
  std::size_t plan_range_bytes_ = 0;  // 0: no range
  int unplanned_scopes_ = 0;
  std::vector<backend::physical_handle> unreleased_;  // releases that failed, retried later
  // cudaMalloc mode: segment base -> size
  std::map<std::uintptr_t, std::size_t> segments_;
  std::size_t segment_bytes_ = 0;
  // Note [Dedicated mappings], Note [Stitching]: base -> mapping (VMM mode).
  struct dedicated_mapping {
    std::size_t bytes;  // mapped bytes (all of range_bytes except after a failed release)
    std::size_t range_bytes;
    // One handle of `bytes` (dedicated) or one page-sized handle per page (stitched).
    std::vector<backend::physical_handle> handles;
    bool stitched;
    bool in_use;
    stream_set streams;  // while cached: streams that may still touch it
    std::uint32_t free_since_epoch = 0;
  };
  std::map<std::uintptr_t, dedicated_mapping> dedicated_;
  std::size_t dedicated_bytes_ = 0;         // all dedicated mappings
  std::size_t dedicated_cached_bytes_ = 0;  // those no block uses
  std::uint64_t next_segment_id_ = 1;
  // Note [Growth]: the most reserved bytes so far (VMM mode).
  std::size_t reserved_high_water_bytes_ = 0;
  // Note [Move budget]: pages of the shared range (or a stitch) created, not moved, and
  // those created only because the budget refused a move.
  std::int64_t pages_created_ = 0;
  std::int64_t pages_created_over_budget_ = 0;
  // Note [Loop plans], Note [Move budget]: what the plan finder sees as churn.
  std::int64_t churn_count() const noexcept { return counters_.page_moves + pages_created_over_budget_; }
};

}  // namespace fragless::core
