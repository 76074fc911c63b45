// VMM pool: the shared range's pages -- where a block goes (Note [Placement]), the pages
// kept mapped as a cache (Note [Page cache]), and how the pages a block lacks are made
// present, a run of them at a time in chunks (Note [Physical chunks]) with one access
// change per run (Note [Access per run]). Where each chunk comes from -- moved, woken or
// created -- is vmm_pool_chunks.cpp.
// Invariant: a page is mapped while a live block touches it; every page a placed block
// touches is mapped and accessible before the block is handed out.
// Not thread-safe: the device cache holds the device lock around every call.
#include "core/vmm_pool.hpp"

#include "core/monotonic_clock.hpp"
#include "core/segment_events.hpp"

namespace fragless::core {

// Note [Page cache]
// "Reserved bytes" in VMM mode are the mapped physical pages. A page stays mapped while
// any live block touches it. When its last block goes, it stays mapped as a cache and is
// reused in place by the next block placed there. Only when a block needs a page where
// none is mapped -- reserved memory would grow -- is a cached free page elsewhere moved
// (its physical handle mapped at the new place, no cuMemCreate; the unmap where it was is
// made when that address is needed, Note [Dormant mappings]), and only if
// no stream may still touch it (checked with a pooled event, never by blocking). Cached
// pages are released for good by empty_cache(), trim() and the OOM path, all of which
// synchronize the device first, and by release_idle_cached() (Note [Release threshold]),
// which never synchronizes: it releases only pages whose free range no stream can still
// touch (every remembered stream answered idle to a pooled event) and leaves the others
// cached until a later call finds them idle.

// Note [Placement]
// In VMM mode a block goes to the best-fitting free range (smallest that fits, lowest
// address among equals) -- the rule that keeps free space least fragmented -- and, since a
// free range is address space, to its start or its end, whichever touches fewer unmapped
// pages. A block that fits a hole between mapped pages thus lands against the mapped side
// and needs no new page. On a tie, a block smaller than a page goes next to a live block
// of its own size if one borders the range on exactly one side, else to the start. Blocks
// of one size tend to be made and freed together (one layer's activations, one parameter
// shape), so side by side their holes join into holes that fit their like again, instead
// of leaving part of a page free between blocks of other lifetimes -- the waste a
// sub-page block causes. For larger blocks the rule made the pages a step touches grow
// (a KV-cache workload went from 1.007x to 1.019x), so they keep the start. We also tried
// ranking ranges by new pages first and size second: it needs fewer map calls but
// fragments more (on the replayed traces up to 1.048x the ideal against 1.012x for best
// fit), and peak reserved memory is what we are judged on.

// Note [Placement]
std::optional<std::pair<std::uintptr_t, free_range_ref>> vmm_pool::choose_placement(std::size_t size_bytes) const {
  // Ordinary placement never enters a loop plan's range (Note [Loop plans]).
  std::optional<free_range_ref> range =
      plan_range_bytes_ == 0 ? index_.best_fit_ref(size_bytes) : index_.best_fit_ref_in(size_bytes, 0);
  if (!range) return std::nullopt;
  const std::uintptr_t at_end = range->address + range->size_bytes - size_bytes;
  const std::size_t new_pages_at_start = pages_.unmapped_pages(range->address, size_bytes, SIZE_MAX);
  // The end is counted only where it could win: fewer new pages, or a tie a sub-page block breaks.
  const bool end_may_win = at_end != range->address && (new_pages_at_start != 0 || size_bytes < pages_.page_bytes());
  const std::size_t new_pages_at_end =
      end_may_win ? pages_.unmapped_pages(at_end, size_bytes, new_pages_at_start + 1) : new_pages_at_start;
  bool use_end = new_pages_at_end < new_pages_at_start;
  if (new_pages_at_end == new_pages_at_start && at_end != range->address && size_bytes < pages_.page_bytes())
    use_end = block_of_size_starts_at(range->address + range->size_bytes, size_bytes) &&
              !block_of_size_ends_at(range->address, size_bytes);
  return std::make_pair(use_end ? at_end : range->address, *range);
}

// Note [Address tables]: blocks never overlap, so the block of `size_bytes` ending at
// `address` is the one starting at address - size_bytes.
bool vmm_pool::block_of_size_ends_at(std::uintptr_t address, std::size_t size_bytes) const noexcept {
  return size_bytes <= address && block_of_size_starts_at(address - size_bytes, size_bytes);
}

bool vmm_pool::block_of_size_starts_at(std::uintptr_t address, std::size_t size_bytes) const noexcept {
  const placed_block* block = placed_blocks_.find(address);
  return block != nullptr && block->size_bytes == size_bytes;
}

backend::status vmm_pool::allocate_vmm(std::size_t size_bytes, stream_id stream, std::uintptr_t* address,
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
    if (planned) {
      *address = plan_base_ + *offset;
    } else {  // Note [Loop plans]: a deviation abandons the plan before the request is placed
      plan_.abandon("the planned place was not usable");
      after_plan_event();
    }
  }
  if (!planned) {
    auto placement = choose_placement(size_bytes);
    if (!placement || wait_forbidden(*placement->second.streams, stream)) {
      backend::status result = allocate_stitched(size_bytes, stream, address, placed_bytes);
      if (result == backend::status::ok) record_mapping_allocation(*address, size_bytes, stream);
      return result;
    }
    const auto& [block_address, range] = *placement;
    backend::status result = place_block(block_address, size_bytes, *range.streams, stream, false);
    if (result != backend::status::ok) return result;
    *address = block_address;
  }
  const std::uint64_t sequence = recorded ? plan_.record_allocation(size_bytes, stream, churn()) : 0;
  if (!recorded) {  // Note [Refused layouts]
    unrecorded_live_bytes_ += size_bytes;
    unrecorded_high_water_bytes_ = std::max(unrecorded_high_water_bytes_, unrecorded_live_bytes_);
    unrecorded_high_since_try_bytes_ = std::max(unrecorded_high_since_try_bytes_, unrecorded_live_bytes_);
  }
  try {
    placed_blocks_.insert_or_assign(*address, placed_block{size_bytes, sequence});
  } catch (...) {
    // Only a placement hint is lost (Note [Placement]).
  }
  after_plan_event();
  return backend::status::ok;
}

backend::status vmm_pool::place_block(std::uintptr_t address, std::size_t size_bytes, const stream_set& range_streams,
                                        stream_id stream, bool planned) {
  // Note [Stream reuse]; range_streams may be the index's own set: read before the carve.
  backend::status result = order_after_streams(range_streams, stream);
  if (result != backend::status::ok) return result;
  result = map_missing_pages(address, size_bytes, planned);
  if (result != backend::status::ok) return result;
  index_.carve_across(address, size_bytes);  // one range, or a plan's pieces (Note [Streams per piece])
  pages_.add_live(address, size_bytes);
  return backend::status::ok;
}

// Note [Physical chunks]
// A page the pool lacks is not created on its own: the run of consecutive missing pages a
// block needs is backed by one physical allocation, a chunk (cuMemCreate of the run, one
// cuMemMap, one access change), where page by page it took three calls per 2 MiB. CUDA
// maps and unmaps an allocation only whole, so a chunk is the unit of mapping, moving and
// releasing: it is moved or released only when no page of it has live bytes, and a page
// move takes a whole idle free chunk. The rule:
//  - a missing page the block shares with its neighbours' address space (its first or
//    last, an edge page) joins the run only when the rest of the run, with it, fits one
//    chunk under every cap below (before the pool first frees a block, only a run of at
//    most 4 pages takes it: Note [First growth]); otherwise it is a chunk of one page.
//    Joined, it lets a block placed later on the rest of that page pin the whole chunk once
//    this block is freed, so edge pages were long kept apart after the first free; a block
//    of a few pages then took two or three chunks where one would do. Under the pinned-page
//    budget (Note [Pinned pages]) no created chunk may pin more than the budget has left,
//    so they join where the run is one chunk. The run is taken a chunk at a time from its
//    start: a run that fits one chunk is one create and one map, a longer run's last chunk
//    takes the last page where it has room. Corpus seeds 1-200 of every family, five
//    repetitions, against edge pages apart after the first free (the budget already
//    applied only after it): first-pass calls -5.5 % (1.57x -> 1.49x expandable
//    segments'), seeds above 1.03x the ideal where the packer reaches 1.01x 20 -> 19, above
//    expandable segments' peak 54 -> 71 (a live neighbour on a freed block's last page,
//    most of them activation-recompute), 6 unet-resolution peaks more than 1 % higher;
//    joined before the first free too wherever the run fits one chunk (up to 20 MiB then),
//    -6.9 %, but 22 seeds above 1.03x and 11 unet-resolution peaks higher (its skip
//    activations, made then, are freed while the blocks made after them live on);
//    docs/compaction.md, "Edge pages and first growth under the budget";
//  - a chunk is never larger than the run the block needs nor, for a created chunk, than
//    the larger of physical_chunk_fraction of reserved memory at that moment and
//    physical_chunk_run_fraction of the run (at least one page, or physical_chunk_min_bytes
//    when that is larger, or, until the pool first frees a block, the 20 MiB of Note
//    [First growth]; and, under a budget for the free pages chunks pin, no larger than one
//    page more than that budget has left: Note [Pinned pages]); whether a run is created
//    or moved is decided once for the run
//    (Note [Page moves]) -- so a small program keeps page granularity and a large one gets
//    large chunks, the geometric growth of PyTorch's segment sizes, and a block large next
//    to reserved memory takes at most 1/physical_chunk_run_fraction chunks (32, or 64
//    under the pinned-page budget; the share
//    is of the whole run, not of what its earlier chunks left of it): without
//    that share of the run, a program growing from nothing cut its first blocks into
//    hundreds of chunks, reserved memory being small then (growing to N pages took about
//    256 (1 + ln(N / 256)) chunks, most of the first pass's calls);
//    physical_chunk_fraction 0 restores one page per allocation;
//  - a moved chunk is one whose pages are all free and idle; it fits the missing run, or
//    lands at the run's start with its surplus on the unmapped pages after it (reserved
//    memory does not change in a move; the surplus pages are cached free pages there),
//    on the same side of a loop plan's edge as the run: a planned block's surplus lands
//    on the plan's next pages, which its later blocks use. (When the surplus could never
//    enter the plan's range, a plan's hand-over found no chunk to fit its runs and created
//    new ones: medium_1024_training reached 1.35x the ideal at 1/256, 1.02x now.) The
//    search for a chunk inspects up to 64 wholly free chunks; chunks still partly live
//    are passed over without counting.
// Cost and bound: a created chunk maps only pages a live block touches at that moment, so
// creating never adds free memory. Its pages later stay mapped as long as one of them has
// live bytes: the free pages held that way in one chunk are fewer than the larger of
// physical_chunk_fraction x the reserved memory when it was made and
// physical_chunk_run_fraction x the block that made it; all chunks together pin what they
// pin, but new chunks shrink while they pin more than the budget of Note [Pinned pages];
// and compaction releases a chunk as soon as all its pages are free and idle.
// The fraction is 1/256 by default: on the shared traces it makes 3.2x fewer device calls
// than one page per allocation for 1.0058x the ideal instead of 1.0047x (geometric
// means), the pinned free pages costing most on pangu_13B.csv (1.012x -> 1.032x);
// docs/compaction.md has the figures per fraction and for physical_chunk_min_bytes.
backend::status vmm_pool::map_missing_pages(std::uintptr_t address, std::size_t size_bytes,
                                              bool move_first) noexcept {
  const std::size_t first = pages_.first_page(address);
  const std::size_t end = pages_.end_page(address, size_bytes);
  // Note [Pinned pages]: the pinned free pages are counted at most once for this block.
  struct pinned_count_scope {
    vmm_pool* pool;
    explicit pinned_count_scope(vmm_pool* owner) noexcept : pool(owner) { pool->in_map_missing_pages_ = true; }
    ~pinned_count_scope() {
      pool->in_map_missing_pages_ = false;
      pool->pinned_free_pages_in_call_ = kPinnedUncounted;
    }
  } pinned_scope(this);
  std::size_t run_begin = first;  // the whole run the next chunk is part of
  std::size_t run_whole_end = first;
  inaccessible_run inaccessible{first, first};  // mapped by this call, access not yet granted
  for (std::size_t page = pages_.first_unmapped(first, end); page < end; page = pages_.first_unmapped(page, end)) {
    std::size_t run_end = pages_.unmapped_run_end(page, end);
    // Note [Physical chunks]: a page the block covers only in part is a chunk of its own --
    // unless the rest of the run, with it, fits one chunk (before the first free, unless
    // the run is short: Note [First growth]).
    if (!edge_pages_join_run(run_end - page)) {
      const bool partial = pages_.page_address(page) < address ||
                           pages_.page_address(page) + pages_.page_bytes() > address + size_bytes;
      if (partial) run_end = page + 1;
      else
        while (run_end > page + 1 && pages_.page_address(run_end - 1) + pages_.page_bytes() > address + size_bytes)
          --run_end;
    }
    if (page >= run_whole_end) {
      run_begin = page;
      run_whole_end = run_end;
    }
    backend::physical_handle handle = 0;
    std::size_t chunk_pages = 0;
    bool resident = false;
    backend::status taken = take_chunk(page, run_end - page, run_whole_end - run_begin, first, end, move_first,
                                       &handle, &chunk_pages, &resident);
    if (taken != backend::status::ok) {
      const backend::status granted = grant_access(&inaccessible);
      return granted != backend::status::ok ? granted : taken;
    }
    if (resident) {
      // Note [Dormant mappings]: mapped with access already. A run of chunks mapped just
      // before it takes it in (one access change either way); otherwise none is needed.
      if (inaccessible.begin_page != inaccessible.end_page && page == inaccessible.end_page) {
        inaccessible.end_page = page + chunk_pages;
      } else {
        const backend::status granted = grant_access(&inaccessible);
        if (granted != backend::status::ok) return granted;
        inaccessible = {page + chunk_pages, page + chunk_pages};
      }
      page += chunk_pages;
      continue;
    }
    // Note [Access per run]: access is granted once the run of chunks side by side ends.
    if (page != inaccessible.end_page) {
      backend::status granted = grant_access(&inaccessible);
      if (granted != backend::status::ok) {
        release_handle(handle);
        return granted;
      }
      inaccessible = {page, page};
    }
    backend::status mapped = map_chunk(page, chunk_pages, handle);
    if (mapped != backend::status::ok) {
      // The handle is in no page's hands now: give it back. Chunks mapped earlier in this
      // call stay mapped as cached free pages (with access), so the pool stays consistent.
      release_handle(handle);
      const backend::status granted = grant_access(&inaccessible);
      return granted != backend::status::ok ? granted : mapped;
    }
    inaccessible.end_page = page + chunk_pages;
    page += chunk_pages;
  }
  return grant_access(&inaccessible);
}

// Note [Access per run]
// cuMemSetAccess is the costly half of mapping (27 us for a 2 MiB page on an H200 against
// 1 us for cuMemMap; docs/cost_model.md), and its price barely grows with the range (45 us
// for 32 MiB). So the chunks a block's missing run is made of are mapped side by side
// first and access to the run is granted in one call, as expandable segments do for their
// handles; a run broken by pages already mapped is one call per piece, and a stitch
// (Note [Stitching]) is one call for all its pages. Until then no page
// of the run is used: the block is placed only after map_missing_pages returns, and a
// later chunk of the same block is never taken from the block's own range. If granting
// fails, the run's chunks are unmapped and released, as map() undoes a mapping whose
// access it could not set; the pages are unmapped to the pool even when an unmap fails
// (the next map there then fails, and is handled as a failed map). A stitch whose access
// change fails is undone the same way; what an unmap failure leaves of it is kept marked
// inaccessible, never handed out, and released by a later pass.
backend::status vmm_pool::grant_access(inaccessible_run* run) noexcept {
  if (run->begin_page == run->end_page) return backend::status::ok;
  const std::uintptr_t address = pages_.page_address(run->begin_page);
  const std::size_t bytes = (run->end_page - run->begin_page) * pages_.page_bytes();
  const std::int64_t start = now_ns();
  const backend::status result = backend_.set_access(device_, address, bytes);
  counters_.map_ns += now_ns() - start;
  if (result != backend::status::ok) {
    for (std::size_t head = run->begin_page; head < run->end_page;) {
      const std::size_t count = pages_.chunk_pages(head);
      backend::physical_handle handle = 0;
      if (!unmap_chunk(head, &handle)) {  // the device refused: the pool forgets the mapping anyway
        notify_segment_event(device_, segment_event_kind::unmap, pages_.page_address(head), count * pages_.page_bytes());
        handle = pages_.set_unmapped(head);
      }
      release_handle(handle);
      head += count;
    }
  }
  run->begin_page = run->end_page;
  return result;
}

}  // namespace fragless::core
