// The large pool in VMM mode (the default where the device supports it; see
// core/large_pool.hpp for the interface): one large reserved virtual range; blocks are
// placed best-fit at 512 B granularity inside it, at the end of their range that needs
// fewer new pages (Note [Placement]); 2 MiB physical pages are mapped under a block when
// it needs them (Note [Page cache]), a run of them as one chunk (Note [Physical chunks]).
// Very large requests get a range and mapping of their
// own instead (Note [Dedicated mappings]), and so does a request no free range can hold
// (Note [Stitching]). Free pages are given back by compaction passes (Note [Compaction]);
// idle cached mappings also before reserved memory passes its high-water mark
// (Note [Growth]), and page moves may be budgeted (Note [Move budget]). A repeating
// loop's step can be laid out once and followed (Note [Loop plans]). A moved chunk's old
// mapping is unmapped only when its address is needed (Note [Dormant mappings]).
// Invariant: every live block lies on mapped pages or in a dedicated mapping; the free
// index holds exactly the shared range's address space that is neither live nor pending;
// a dedicated mapping holds one block or is wholly cached; reserved bytes = mapped pages +
// dedicated/stitched mappings, so a snapshot's regions add up to them.
// Not thread-safe: the device cache holds the device lock around every call.
// Code (each file holds the notes it implements): vmm_pool.cpp (set-up, entry points,
// releasing blocks), vmm_pool_pages.cpp (placement, page cache, physical chunks, access),
// vmm_pool_chunks.cpp (page moves, where a chunk comes from), vmm_pool_mappings.cpp
// (dedicated and stitched mappings), vmm_pool_compaction.cpp, vmm_pool_growth.cpp (growth
// rules), vmm_pool_plans.cpp (loop plans), vmm_pool_sharing.cpp (IPC pieces),
// vmm_pool_dormant.cpp (deferred unmaps).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "core/address_table.hpp"
#include "core/dormant_mappings.hpp"
#include "core/large_pool.hpp"
#include "core/loop_plan.hpp"
#include "core/page_map.hpp"

namespace fragless::core {

// Note [Compaction]: free pages an explicit pass keeps.
constexpr std::size_t kCachedPagesKept = 4;

class vmm_pool final : public large_pool {
 public:
  vmm_pool(backend::backend& device_backend, int device, event_pool& events, const cache_settings& settings);
  ~vmm_pool() override;

  // Reserves the shared range of `range_bytes` (rounded to pages). False when it cannot
  // (the caller falls back to cudaMalloc segments), with *host_memory_failed set when host
  // memory, not the device, was missing.
  bool initialize(std::size_t range_bytes, bool* host_memory_failed) noexcept;

  bool uses_vmm() const noexcept override { return true; }
  backend::status allocate(std::size_t size_bytes, stream_id stream, std::uintptr_t* address,
                           std::size_t* placed_bytes = nullptr) noexcept override;
  bool release(std::uintptr_t address, std::size_t size_bytes, const stream_set& streams) noexcept override;
  compaction_outcome compact(const compaction_pass& pass) noexcept override;
  void forget_streams() noexcept override;
  bool rename_stream(stream_id from, stream_id to) override;
  void advance_epoch() noexcept override { pages_.advance_epoch(); }
  const loop_plan_counters& loop_plan_counts() const noexcept override { return plan_.counters(); }
  bool plan_wants_room() const noexcept override { return plan_wants_room_; }
  void room_given() noexcept override;
  std::size_t reserved_bytes() const noexcept override { return pages_.mapped_bytes() + dedicated_bytes_; }
  std::size_t device_segment_count() const noexcept override { return pages_.mapped_run_count() + dedicated_.size(); }
  std::size_t cached_free_bytes() const noexcept override { return mapped_cached_bytes(); }
  std::size_t largest_free_reserved_bytes() const noexcept override;
  std::size_t cached_pages_kept_bytes() const noexcept override { return kCachedPagesKept * pages_.page_bytes(); }
  std::size_t mapped_page_count() const noexcept override { return pages_.mapped_count(); }
  std::vector<reserved_region> reserved_regions() const override;
  std::vector<reserved_region> cached_dedicated_regions() const override;
  std::vector<shared_piece> shared_pieces(std::uintptr_t address, std::size_t bytes) const override;
  // Note [Dormant mappings]: makes every unmap deferred so far (before a capture begins).
  void unmap_dormant_ranges() noexcept override;

  const page_map& pages() const noexcept { return pages_; }
  const dormant_mappings& dormant() const noexcept { return dormant_; }

 private:
  // Note [Page moves]: pages that may be mapped before missing ones are moved, not created.
  std::size_t growth_allowance_pages() const noexcept;
  backend::status allocate_vmm(std::size_t size_bytes, stream_id stream, std::uintptr_t* address,
                               std::size_t* placed_bytes);
  // Note [Loop plans]: places a block at `address` in the plan's range if that place is
  // free and usable from `stream`; `*placed` says whether it was.
  backend::status allocate_planned(std::uintptr_t address, std::size_t size_bytes, stream_id stream, bool* placed);
  // Orders `stream` after `range_streams` (the index's own set is fine: read before the
  // carve), maps what [address, address + size_bytes) lacks and makes the block live
  // there (free ranges cover it without a gap). `planned`: pages are moved before created.
  backend::status place_block(std::uintptr_t address, std::size_t size_bytes, const stream_set& range_streams,
                              stream_id stream, bool planned);
  // Note [Loop plans]: reserves the pending plan's range, or rejects the plan.
  void start_plan() noexcept;
  // Note [Loop plans], Note [Hand-over pages]: the page-aligned base of `span_bytes`
  // inside one free range whose hand-over creates the fewest pages, and among those
  // covers the most cached free pages, with that range; nullopt when none covers any.
  std::optional<std::pair<std::uintptr_t, free_range>> plan_range_over_free_pages(std::size_t span_bytes) const;
  // Note [Loop plans]: gives an inactive plan's range back to ordinary placement.
  void dissolve_plan_range() noexcept;
  // Note [Loop plans]: after each recorded event, starts a plan that reached its first
  // planned event, or dissolves the range of one just abandoned.
  // A pending plan first asks its owner for the empty slabs (room_given() starts it).
  void after_plan_event() noexcept {
    weigh_refused_layout();
    if (plan_.plan_pending()) plan_wants_room_ = true;
    if (plan_range_bytes_ != 0 && !plan_.active()) dissolve_plan_range();
  }
  // Note [Refused layouts]: takes a refused step's kept layout at the step's start when
  // reserved memory holds it, else sets what reserved memory must reach to hold it.
  void weigh_refused_layout() noexcept;
  // Reserved memory no live block holds (cached free pages, idle mappings), and growth up
  // to the high-water mark, which sets no new peak (Note [Refused layouts], Note [Waits as
  // churn]).
  std::size_t room_below_peak_bytes() const noexcept;
  // Note [Refused layouts]: reserved memory has reached what the refused layout needs.
  bool refused_layout_covered() const noexcept {
    return refused_layout_target_bytes_ != 0 && plan_.refused_layout_kept() &&
           reserved_bytes() >= refused_layout_target_bytes_;
  }
  // Note [Loop plans]: records a block served by the dedicated or stitched mapping at `base`.
  void record_mapping_allocation(std::uintptr_t base, std::size_t size_bytes, stream_id stream) noexcept;
  bool in_plan_range(std::uintptr_t address) const noexcept {
    return address - plan_base_ < plan_range_bytes_;
  }
  // The plan's pages [first, end); both SIZE_MAX when there is no plan range.
  std::pair<std::size_t, std::size_t> plan_pages() const noexcept {
    if (plan_range_bytes_ == 0) return {SIZE_MAX, SIZE_MAX};
    return {pages_.first_page(plan_base_), pages_.end_page(plan_base_, plan_range_bytes_)};
  }
  // Note [Placement]: the address for a block of `size_bytes` and the free range holding it.
  std::optional<std::pair<std::uintptr_t, free_range_ref>> choose_placement(std::size_t size_bytes) const;
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
  // `whole_run_pages`: the run the block lacked before its earlier chunks were mapped.
  // *resident: the chunk is mapped at `at` already, with access (Note [Dormant mappings]).
  backend::status take_chunk(std::size_t at, std::size_t run_pages, std::size_t whole_run_pages,
                             std::size_t first, std::size_t end, bool move_first,
                             backend::physical_handle* handle, std::size_t* chunk_pages, bool* resident) noexcept;
  // Creates a chunk of `pages` pages within the reserved limit (fewer if only fewer fit,
  // one if the device refuses more).
  backend::status create_physical_chunk(std::size_t pages, backend::physical_handle* handle,
                                        std::size_t* chunk_pages) noexcept;
  // Note [Physical chunks]: the most pages a created chunk backing a run of `run_pages`
  // may have now.
  std::size_t chunk_cap_pages(std::size_t run_pages) const noexcept;
  // Note [Pinned pages]: the most pages a created chunk may have under the pinned-page
  // budget (SIZE_MAX: no budget).
  std::size_t pinned_budget_cap_pages() const noexcept;
  // Note [First growth]: whether its rules apply now -- chunks on, the option at least a
  // page, and no block of the pool freed yet.
  bool first_growth() const noexcept;
  // Note [Physical chunks]: whether a run of `run_pages` missing pages takes the pages its
  // block covers only in part (its edge pages) into its chunks now.
  bool edge_pages_join_run(std::size_t run_pages) const noexcept;
  // Unmapped pages from `at` on that a chunk placed for a run of `run_pages` there may
  // cover: the run, and its surplus on the same side of the plan's edge (Note [Physical chunks]).
  std::size_t room_pages_at(std::size_t at, std::size_t run_pages, std::size_t whole_run_pages) const noexcept;
  // Moves a whole idle cached free chunk to page `at` (Note [Physical chunks]).
  bool take_cached_chunk(std::size_t at, std::size_t run_pages, std::size_t whole_run_pages, std::size_t first,
                         std::size_t end, backend::physical_handle* handle, std::size_t* chunk_pages) noexcept;
  // Unmaps the highest cached free chunk of at most `max_pages` pages that no stream can
  // still touch and that overlaps neither pages [first, end) nor the plan's range; its
  // handle and pages. False when none of the first kMoveCandidates such chunks could go.
  // `leave_dormant`: the chunk moves within the range, and its old mapping may stay
  // (Note [Dormant mappings]).
  bool unmap_idle_chunk(std::size_t first, std::size_t end, std::size_t max_pages, bool leave_dormant,
                        backend::physical_handle* handle, std::size_t* chunk_pages) noexcept;
  // Note [Dormant mappings]: the chunk whose dormant range starts at `at`, no larger than
  // room_pages_at(at, run_pages, whole_run_pages), idle, wholly free and outside pages
  // [first, end) and the plan's range, mapped at `at` again for no call (its range now is
  // left dormant). False when there is none.
  bool wake_dormant_chunk(std::size_t at, std::size_t run_pages, std::size_t whole_run_pages, std::size_t first,
                          std::size_t end, backend::physical_handle* handle, std::size_t* chunk_pages) noexcept;
  // Note [Dormant mappings]: the pool forgets the idle free chunk at `head` and hands over
  // its handle, leaving the mapping on the device as the chunk's dormant range (its
  // earlier dormant range, if any, is unmapped first); false, with the chunk still
  // mapped, when the device refused that unmap.
  bool leave_chunk_dormant(std::size_t head, backend::physical_handle* handle) noexcept;
  // Note [Dormant mappings]: unmaps the dormant ranges over pages [first, end) (the calls
  // deferred until now); the first refusal, if any.
  backend::status unmap_dormant_over(std::size_t first, std::size_t end) noexcept;
  // Unmaps one dormant range and forgets it; false when the device refused.
  bool unmap_dormant(const dormant_mappings::mapping& dormant) noexcept;
  // Is every free range over the chunk at `head` one no stream can still touch?
  bool make_chunk_idle(std::size_t head) noexcept;
  // Reuses a cached dedicated/stitched mapping of exactly `bytes`, if any.
  bool reuse_mapping(std::size_t bytes, stream_id stream, std::uintptr_t* address, backend::status* result) noexcept;
  void compact_pages(const compaction_pass& pass, std::size_t* mapped_cached, std::size_t* unmapped_pages) noexcept;
  std::size_t mapped_cached_bytes() const noexcept {
    return pages_.cached_free_pages().size() * pages_.page_bytes() + dedicated_cached_bytes_;
  }
  backend::status map_missing_pages(std::uintptr_t address, std::size_t size_bytes, bool move_first = false) noexcept;
  backend::status allocate_dedicated(std::size_t size_bytes, stream_id stream, std::uintptr_t* address,
                                     std::size_t* placed_bytes);
  // Unmaps one cached dedicated/stitched mapping and releases its handles; false (and
  // kept, possibly smaller) if a call fails.
  bool release_dedicated(std::uintptr_t base) noexcept;
  // Releases cached dedicated/stitched mappings (only idle ones unless pass.synchronized,
  // only aged ones with pass.aged_only) while more than pass.bytes_to_keep bytes are
  // cached; `cached` is updated.
  void release_dedicated_mappings(const compaction_pass& pass, std::size_t* cached) noexcept;
  // Unmaps the chunk at `head` (its pages become unmapped) and hands over its handle;
  // false, with the chunk still mapped, when the device refused. A dormant range of the
  // handle stays until the handle is released (Note [Dormant mappings]).
  bool unmap_chunk(std::size_t head, backend::physical_handle* handle) noexcept;
  // Maps `handle` over pages [first, first + count) as one chunk (Note [Physical chunks]),
  // without access: map_missing_pages grants it per run (Note [Access per run]).
  backend::status map_chunk(std::size_t first, std::size_t count, backend::physical_handle handle) noexcept;
  // Pages [begin_page, end_page): chunks mapped side by side, access not yet granted.
  struct inaccessible_run {
    std::size_t begin_page, end_page;
  };
  // Grants access to the run and empties it; on failure unmaps and releases its chunks.
  backend::status grant_access(inaccessible_run* run) noexcept;
  // Releases a physical handle, or keeps it for a later retry when the release fails; its
  // dormant range, if any, is unmapped first (Note [Dormant mappings]).
  void release_handle(backend::physical_handle handle) noexcept;
  // Note [Growth]: before reserved memory grows by `bytes`, gives back idle cached
  // dedicated/stitched mappings while the growth would pass the high-water mark.
  void make_room_for_growth(std::size_t bytes) noexcept;
  // Note [Growth]: records reserved memory after it grew.
  void note_growth() noexcept { reserved_high_water_bytes_ = std::max(reserved_high_water_bytes_, reserved_bytes()); }
  // Note [Growth]: would reserved memory pass its high-water mark, grown by `bytes`?
  bool growth_passes_mark(std::size_t bytes) const noexcept {
    return reserved_bytes() + bytes > reserved_high_water_bytes_;
  }
  // Note [Growth]: a huge request goes to the shared range unless a cached mapping fits it
  // exactly or its memory is new (it would pass the high-water mark, no idle cached
  // mapping is left to give back and the shared range has no free page).
  bool huge_block_goes_shared(std::size_t size_bytes) noexcept;
  // Note [Move budget]: may a missing page be moved now rather than created?
  bool move_within_budget() const noexcept;

  // Note [Compaction]: automatic passes take only what stayed free through this many passes.
  const std::uint32_t compaction_age_passes_;
  // Note [Compaction]: whether memory free since `free_since_epoch` may go in an aged pass.
  bool old_enough(std::uint32_t free_since_epoch) const noexcept {
    return pages_.epoch() - free_since_epoch >= compaction_age_passes_;
  }
  std::uintptr_t range_base_ = 0;
  std::size_t range_bytes_ = 0;
  page_map pages_;
  dormant_mappings dormant_;  // Note [Dormant mappings]
  // Blocks placed in the shared range, start -> size and loop-plan sequence: placement
  // hints only (Note [Placement], Note [Loop plans]); a block missing here (no host memory
  // when it was placed) is harmless. A hash table (Note [Address tables]).
  struct placed_block {
    std::size_t size_bytes = 0;
    std::uint64_t sequence = 0;
  };
  address_table<placed_block> placed_blocks_;
  // Note [Loop plans]: the plan and its address range (a free-index segment of its own,
  // kept in pieces: Note [Streams per piece]).
  static constexpr std::uint64_t kPlanSegmentId = kPieceSegmentFlag | 1;
  stream_set planned_wait_streams_;  // Note [Streams per piece]: reused, no allocation
  loop_plan plan_;
  std::uintptr_t plan_base_ = 0;
  std::size_t plan_range_bytes_ = 0;  // 0: no range
  bool plan_wants_room_ = false;      // waiting for the owner's empty slabs
  // Note [Refused layouts]: reserved bytes that hold the refused layout beside what else is
  // live at the step's start; 0 when no refused layout is kept.
  std::size_t refused_layout_target_bytes_ = 0;
  std::size_t refused_held_at_start_bytes_ = 0;  // what live blocks held at the step's start
  // Note [Refused layouts]: live bytes of blocks no plan sees (slabs, the exact start's
  // small blocks), and their highest since the refused step last started.
  std::size_t unrecorded_live_bytes_ = 0;
  std::size_t unrecorded_high_water_bytes_ = 0;
  std::size_t unrecorded_at_start_bytes_ = 0;     // live at the refused step's last start
  std::size_t unrecorded_step_growth_bytes_ = 0;  // their growth over the last whole step
  // Note [Waits as churn]: their highest since a pending plan last tried to start, and
  // what was live then.
  std::size_t unrecorded_high_since_try_bytes_ = 0;
  std::size_t unrecorded_at_try_bytes_ = 0;
  std::vector<backend::physical_handle> unreleased_;  // releases that failed, retried later
  // Note [Dedicated mappings], Note [Stitching]: base -> mapping.
  struct dedicated_mapping {
    std::size_t bytes;  // mapped bytes (all of range_bytes except after a failed release)
    std::size_t range_bytes;
    // One handle of `bytes` (dedicated) or one page-sized handle per page (stitched).
    std::vector<backend::physical_handle> handles;
    bool stitched;
    bool in_use;
    stream_set streams;  // while cached: streams that may still touch it
    std::uint32_t free_since_epoch = 0;
    std::uint64_t plan_sequence = 0;  // Note [Loop plans]: the block's; 0 while cached or unrecorded
    // False only for a stitch kept after its access change failed (Note [Access per run]).
    bool accessible = true;
    // Cached, wholly mapped, accessible and of exactly `rounded_bytes`: a request of that
    // size reuses it.
    bool fits_exactly(std::size_t rounded_bytes) const noexcept {
      return !in_use && accessible && bytes == rounded_bytes && range_bytes == rounded_bytes;
    }
  };
  std::map<std::uintptr_t, dedicated_mapping> dedicated_;
  std::size_t dedicated_bytes_ = 0;         // all dedicated mappings
  std::size_t dedicated_cached_bytes_ = 0;  // those no block uses
  // Note [Growth]: the most reserved bytes so far.
  std::size_t reserved_high_water_bytes_ = 0;
  // Note [Move budget]: pages of the shared range (or a stitch) created, not moved, and
  // those created only because the budget refused a move.
  std::int64_t pages_created_ = 0;
  std::int64_t pages_created_over_budget_ = 0;
  // Note [Move budget]: pages moved by choice where a block lacked them (not a loop plan's
  // moves, not a moved chunk's surplus).
  std::int64_t pages_moved_ = 0;
  // Note [First growth]: a block of this pool has been freed (chunks are capped from then on).
  bool freed_a_block_ = false;
  // Note [Pinned pages]: page_map::pinned_free_pages(), counted at most once per
  // map_missing_pages call (kPinnedUncounted: not yet in this call), which alone sets
  // in_map_missing_pages_.
  static constexpr std::size_t kPinnedUncounted = SIZE_MAX;
  mutable std::size_t pinned_free_pages_in_call_ = kPinnedUncounted;
  bool in_map_missing_pages_ = false;
  // Note [Loop plans], Note [Move budget], Note [Waits as churn]: what the plan finder
  // sees as churn (moves back where a chunk lay dormant too: Note [Dormant mappings]).
  loop_churn churn() const noexcept {
    const auto page_bytes = static_cast<std::int64_t>(pages_.page_bytes());
    return loop_churn{(counters_.page_moves + counters_.dormant_returns + pages_created_over_budget_) * page_bytes,
                      counters_.cross_stream_waits * page_bytes / loop_churn::kWaitsPerPageMove};
  }
};

}  // namespace fragless::core
