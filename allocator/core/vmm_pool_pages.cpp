// VMM pool: the shared range's pages -- where a block goes (Note [Placement]),
// the pages kept mapped as a cache (Note [Page cache]), when a missing page is moved
// rather than created (Note [Page moves]) and when a free chunk too large to move is given
// back first (Note [Chunks given back]); chunks (Note [Physical chunks]).
// Invariant: a page is mapped while a live block touches it; a page moved or released is
// one no stream can still touch; every handle taken off a page is mapped again, released,
// or queued in unreleased_ for a later retry.
// Not thread-safe: the device cache holds the device lock around every call.
#include "core/vmm_pool.hpp"

#include "backend/capture_aware_backend.hpp"
#include "core/monotonic_clock.hpp"
#include "core/segment_events.hpp"
#include "core/size_classes.hpp"

namespace fragless::core {
namespace {

// How many cached free chunks an allocation inspects before creating a new one instead
// (with chunks a candidate often does not fit: at a fraction of 1/16, 8 left pangu_2.6B at
// 1.166x the ideal and an unbounded search at 1.093x; at 1/256, 64 and unbounded both 1.022x).
constexpr int kMoveCandidates = 64;

}  // namespace

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

// Note [Page moves]
// A block that needs a page where none is mapped either gets a new physical page
// (cuMemCreate + cuMemMap) or takes an idle cached free page from elsewhere
// (Note [Page cache]; cuMemMap, and a cuMemUnmap now or later, Note [Dormant mappings]; no
// new memory; a run of missing pages is
// served at once, by whole chunks: Note [Physical chunks]). Moving keeps reserved memory at the peak
// of pages live blocks touch at once, the lowest there is, but a loop whose blocks touch,
// over one step, more distinct pages than at its peak then moves pages every step; creating
// lets reserved memory settle at the pages the step touches over time, after which a
// repeating loop makes no device call. The pool does both, in that order:
//  - while fewer pages are mapped than the growth allowance -- (1 + page_move_headroom) x
//    the peak of the pool's live bytes, rounded down to pages, and never less than the
//    peak of pages touched at once -- it creates;
//  - past the allowance it moves (and creates only when no idle cached page is found).
// The allowance is granted only once a loop plan of the pool has waited to hand over
// (Note [Loop plans]: postponed, its hand-over dearer than the churn it would save); until
// then it is zero and the pool moves first. A loop whose moves stop by themselves needs
// no allowance; a loop whose plan hands over at once is placed by the plan (a planned
// block moves a page before creating one, and the plan's pages are never moved away); a
// loop whose layout is refused is settled by the move budget (Note [Move budget]); but a
// loop whose plan waits keeps moving pages every step while it waits, and the headroom
// lets those steps settle instead: its pages over a step, if they fit in the headroom,
// stay mapped and it reaches zero device calls per step (as long as automatic compaction
// leaves them alone, Note [Compaction]). Granted from the start, the headroom left
// reserved memory up to 1 % higher on loops that never needed it: on the generated corpus
// (11,000 seeds) peaks 1.0140x the ideal against 1.0115x, and 830 seeds above expandable
// segments' peak against 375; it saved 2.7 % of first-pass calls, and on a few seeds left
// spare chunks a later plan's hand-over moved where it now creates (docs/compaction.md,
// "Kept: the growth allowance only once a plan waits"). The headroom was
// 2 % before loop plans; over five repetitions a slowly growing trace
// (medium_512_inference) then crept to 1.017x, above PyTorch's 1.016x, while 1 % leaves
// every trace at or below PyTorch and at zero calls per step but one (kv-cache-inference,
// whose best layout is more than loop_plan_headroom over its step's peak); the move budget
// (Note [Move budget]) brings that one to zero calls too, at 1.017x instead of 1.009x.
// page_move_headroom 0 restores pure moving; page_moves off never moves while the
// reserved limit and the device allow.

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

// Note [Chunks given back]
// Past the growth allowance the pool moves a missing run's pages rather than create them
// (Note [Page moves]), but a move takes a whole idle free chunk no larger than the room
// there, and a chunk made for a large block (up to 1/32 of its run, Note [Physical
// chunks]) is larger than the runs the smaller blocks later placed in its old memory lack.
// Such chunks then sat free while runs beside them created new ones: corpus
// `quantized-attention` seed 34, in its second pass, created pages with 1,877 cached free
// pages in chunks too large for the room (and 202 in chunks still partly live), and
// settled at 1.105x the ideal (1.026x without the run's share, for twice the calls; 1.025x
// with this rule, for 1.3x). So the rule of Note [Growth] -- reserved memory passes its high-water
// mark only when nothing idle is left to give back -- holds for such chunks too: where an
// ordinary run (not a stitch's page) the pool would rather move to finds no chunk that fits,
// and creating it would pass the mark, one idle wholly free chunk that did not fit is given
// back first (an unmap and a release), as a planned run already does. Below the mark
// nothing is given back, so a loop that settled stays settled: given back every time, a
// loop re-created the chunk later in the step and gave it back again in the next
// (`params-optimizer` seed 32: 1,632 calls in its fifth pass). Seeds 1-200 of every family,
// five repetitions, fragless alone: seeds above 1.03x the ideal where the packer reaches
// 1.01x 84 -> 49 (`quantized-attention` 36 -> 3), above expandable segments' peak 79 -> 49,
// peaks lower by more than 1 % on 64 and higher on 2 (`many-streams` seeds 175 and 181, by
// 1.1 % and 1.2 %), first-pass calls +2.2 %, fifth-pass calls 666 -> 476.

// Note [Page moves], Note [Physical chunks]
backend::status vmm_pool::take_chunk(std::size_t at, std::size_t run_pages, std::size_t whole_run_pages,
                                       std::size_t first, std::size_t end, bool move_first, backend::physical_handle* handle,
                                       std::size_t* chunk_pages, bool* resident) noexcept {
  *resident = false;
  // Note [Dormant mappings]: a chunk lying dormant here comes back first -- no call, no new
  // memory -- whatever the allowance and the budget say about moves.
  if (at != SIZE_MAX && !dormant_.empty() &&
      wake_dormant_chunk(at, run_pages, whole_run_pages, first, end, handle, chunk_pages)) {
    *resident = true;
    return backend::status::ok;
  }
  backend::status created = backend::status::out_of_memory;
  // Note [Move budget]: past the allowance, a move must also be paid for by pages created.
  const bool within_allowance = !settings_.conf.page_moves || pages_.mapped_count() < growth_allowance_pages();
  bool over_budget = !move_first && !within_allowance && !move_within_budget();
  // Note [Refused layouts]: the budget would create for a loop whose refused layout is kept;
  // once reserved memory holds that layout, the page is moved instead, as the layout's cost.
  bool layout_move = false;
  if (over_budget && plan_.refused_layout_kept()) {
    layout_move = refused_layout_covered();
    over_budget = !layout_move;
  }
  const bool create_first = !move_first && (within_allowance || over_budget);
  const std::size_t create_pages = std::min(run_pages, chunk_cap_pages(whole_run_pages));
  if (create_first) make_room_for_growth(create_pages * pages_.page_bytes());  // Note [Growth]
  if (create_first) {
    created = create_physical_chunk(create_pages, handle, chunk_pages);
    if (created == backend::status::ok) {
      if (over_budget) pages_created_over_budget_ += static_cast<std::int64_t>(*chunk_pages);
      return created;
    }
  }
  // The device refused (or the limit did): a move is the only way left.
  if (take_cached_chunk(at, run_pages, whole_run_pages, first, end, handle, chunk_pages)) {
    // Note [Move budget]: a loop plan's moves are the plan's cost, not a choice; so are the
    // moves of a loop whose refused layout the budget has paid for (Note [Refused layouts]).
    if (!move_first && !layout_move)
      pages_moved_ += static_cast<std::int64_t>(std::min(*chunk_pages, run_pages));
    // Note [Pinned pages]: a surplus lands as free pages of a chunk its block makes live.
    if (pinned_free_pages_in_call_ != kPinnedUncounted && *chunk_pages > run_pages)
      pinned_free_pages_in_call_ += *chunk_pages - run_pages;
    return backend::status::ok;
  }
  if (create_first) return created;  // no second create after a refusal
  // Note [Loop plans]: a planned run that no cached chunk fits (each is larger than the
  // room there) takes the memory of one instead, so that the hand-over does not grow --
  // before the growth rule would give back a cached mapping the step still reuses (Note
  // [Mapped blocks in a plan]). So does an ordinary run the pool would rather move to,
  // where creating would pass the high-water mark (Note [Chunks given back]).
  const bool planned_run = move_first && at != SIZE_MAX && in_plan_range(pages_.page_address(at));
  const bool passes_mark = !move_first && at != SIZE_MAX && growth_passes_mark(create_pages * pages_.page_bytes());
  if (planned_run || passes_mark) {
    backend::physical_handle spare = 0;
    std::size_t spare_pages = 0;
    if (unmap_idle_chunk(first, end, SIZE_MAX, false, &spare, &spare_pages)) release_handle(spare);
  }
  make_room_for_growth(create_pages * pages_.page_bytes());  // Note [Growth]
  return create_physical_chunk(create_pages, handle, chunk_pages);
}

backend::status vmm_pool::take_page(std::size_t first, std::size_t end, bool move_first,
                                      backend::physical_handle* handle) noexcept {
  std::size_t pages = 0;
  bool resident = false;
  return take_chunk(SIZE_MAX, 1, 1, first, end, move_first, handle, &pages, &resident);
}

// Creates a chunk of `pages` pages within the reserved limit (fewer if only fewer fit, one
// if the device refuses more).
backend::status vmm_pool::create_physical_chunk(std::size_t pages, backend::physical_handle* handle,
                                                  std::size_t* chunk_pages) noexcept {
  const std::size_t page_bytes = pages_.page_bytes();
  const std::size_t reserved = reserved_bytes();
  if (reserved + page_bytes > reserved_limit_bytes_) return backend::status::out_of_memory;
  pages = std::min(pages, (reserved_limit_bytes_ - reserved) / page_bytes);
  backend::status created = backend_.create_physical(device_, pages * page_bytes, handle);
  if (created == backend::status::out_of_memory && pages > 1) {
    pages = 1;
    created = backend_.create_physical(device_, page_bytes, handle);
  }
  if (created != backend::status::ok) return created;
  ++counters_.device_alloc;
  pages_created_ += static_cast<std::int64_t>(pages);  // Note [Move budget]
  *chunk_pages = pages;
  return backend::status::ok;
}

// Note [Page moves]: how many pages may be mapped before a missing page is moved rather
// than created: the headroom over the peak of live bytes, and never fewer than the peak of
// pages live blocks touched at once (below that, moving cannot help); none before a loop
// plan has waited to hand over.
std::size_t vmm_pool::growth_allowance_pages() const noexcept {
  const double headroom = plan_.hand_over_waited() ? settings_.conf.page_move_headroom : 0.0;
  if (headroom <= 0.0) return 0;
  const double allowed_bytes = static_cast<double>(pages_.live_high_water_bytes()) * (1.0 + headroom);
  const auto allowed_pages = static_cast<std::size_t>(allowed_bytes / static_cast<double>(pages_.page_bytes()));
  return std::max(pages_.touched_high_water_pages(), allowed_pages);
}

// Is every free range over the chunk at `head` one no stream can still touch?
bool vmm_pool::make_chunk_idle(std::size_t head) noexcept {
  const std::size_t count = pages_.chunk_pages(head);
  // Every free range over the chunk: a plan's pieces (Note [Streams per piece]) may be
  // several within one page.
  const std::uintptr_t end = pages_.page_address(head) + count * pages_.page_bytes();
  for (std::uintptr_t address = pages_.page_address(head); address < end;) {
    if (!make_range_idle(address)) return false;
    const std::optional<free_range_ref> range = index_.containing_ref(address);
    if (!range) {  // live bytes here: the next range, if any, starts further on
      const std::size_t page = pages_.first_page(address);
      address = std::max(address + 1, pages_.page_address(page) + pages_.page_bytes());
      continue;
    }
    address = range->address + range->size_bytes;
  }
  return true;
}

// Moves a whole cached free chunk whose past users are all done to page `at`: one of at
// most `run_pages` pages, or a larger one whose surplus lands on unmapped pages after the
// run (Note [Physical chunks]). Never one overlapping pages [first, end) or the plan's.
bool vmm_pool::take_cached_chunk(std::size_t at, std::size_t run_pages, std::size_t whole_run_pages,
                                   std::size_t first, std::size_t end, backend::physical_handle* handle,
                                   std::size_t* chunk_pages) noexcept {
  const std::size_t room_pages = at == SIZE_MAX ? run_pages : room_pages_at(at, run_pages, whole_run_pages);
  // Note [Dormant mappings]: a chunk moved within the range may leave its mapping behind
  // -- not while a capture is set up or underway, which could not unmap it later.
  const bool leave_dormant = at != SIZE_MAX && settings_.conf.deferred_unmaps && backend::unmaps_deferrable();
  if (!unmap_idle_chunk(first, end, room_pages, leave_dormant, handle, chunk_pages)) return false;
  counters_.page_moves += static_cast<std::int64_t>(*chunk_pages);
  return true;
}

// Unmapped pages from `at` on, which a larger chunk's surplus may cover. The surplus stays
// on the side of the plan's edge that `at` is on: a planned block's within the plan's
// range, an ordinary block's outside it.
std::size_t vmm_pool::room_pages_at(std::size_t at, std::size_t run_pages, std::size_t whole_run_pages) const noexcept {
  std::size_t room_pages = run_pages;
  const bool at_in_plan = in_plan_range(pages_.page_address(at));
  const std::size_t limit = std::min(pages_.page_count(), at + chunk_cap_pages(whole_run_pages) + run_pages);
  while (at + room_pages < limit && !pages_.is_mapped(at + room_pages) &&
         in_plan_range(pages_.page_address(at + room_pages)) == at_in_plan)
    ++room_pages;
  return room_pages;
}

// Highest addresses first: blocks drift towards the start of the range. A loop plan's
// pages stay where the plan needs them every step (Note [Loop plans]).
bool vmm_pool::unmap_idle_chunk(std::size_t first, std::size_t end, std::size_t max_pages, bool leave_dormant,
                                  backend::physical_handle* handle, std::size_t* chunk_pages) noexcept {
  const auto& cached = pages_.cached_free_pages();
  int inspected = 0;
  const auto [plan_first, plan_end] = plan_pages();
  for (std::size_t candidate = cached.highest_below(page_set::npos);
       candidate != page_set::npos && inspected < kMoveCandidates;) {
    const std::size_t head = pages_.chunk_head(candidate);
    const std::size_t count = pages_.chunk_pages(head);
    if (head < plan_end && head + count > plan_first) {
      // Skip the plan's pages at once: go on from the highest page below them.
      candidate = cached.highest_below(std::min(head, plan_first));
      continue;
    }
    if (head < end && head + count > first) {
      // The run's own pages (a large block's range holds many cached ones): go on from the
      // highest cached page below them at once, as past the plan's.
      candidate = cached.highest_below(std::min(head, first));
      continue;
    }
    // The next candidate: the highest cached page below this chunk.
    candidate = cached.highest_below(head);
    if (count > max_pages) continue;
    if (!pages_.chunk_free(head)) continue;
    ++inspected;
    if (!make_chunk_idle(head)) continue;
    if (!(leave_dormant ? leave_chunk_dormant(head, handle) : unmap_chunk(head, handle))) continue;
    *chunk_pages = count;
    return true;
  }
  return false;
}

backend::status vmm_pool::map_chunk(std::size_t first, std::size_t count, backend::physical_handle handle) noexcept {
  const std::uintptr_t address = pages_.page_address(first);
  const std::size_t bytes = count * pages_.page_bytes();
  // Note [Dormant mappings]: the unmaps deferred over these pages are made now.
  backend::status result = unmap_dormant_over(first, first + count);
  if (result != backend::status::ok) return result;
  const std::int64_t start = now_ns();
  result = backend_.map_without_access(device_, address, bytes, handle);  // Note [Access per run]
  counters_.map_ns += now_ns() - start;
  if (result != backend::status::ok) return result;
  ++counters_.map;
  pages_.set_mapped(first, count, handle);
  dormant_.set_active_head(handle, first);  // a moved chunk's dormant range may wake later
  note_growth();  // Note [Growth]
  notify_segment_event(device_, segment_event_kind::map, address, bytes);
  return backend::status::ok;
}

bool vmm_pool::unmap_chunk(std::size_t head, backend::physical_handle* handle) noexcept {
  const std::uintptr_t address = pages_.page_address(head);
  const std::size_t bytes = pages_.chunk_pages(head) * pages_.page_bytes();
  const std::int64_t start = now_ns();
  if (backend_.unmap(device_, address, bytes) != backend::status::ok) return false;
  counters_.unmap_ns += now_ns() - start;
  ++counters_.unmap;
  notify_segment_event(device_, segment_event_kind::unmap, address, bytes);
  *handle = pages_.set_unmapped(head);
  dormant_.set_active_head(*handle, dormant_mappings::npos);  // out of the range: its dormant range never wakes
  return true;
}

void vmm_pool::release_handle(backend::physical_handle handle) noexcept {
  // Note [Dormant mappings]: released memory goes back to the device only once every
  // mapping of it is gone; if the dormant one stays (the device refused), it stays an orphan.
  if (const dormant_mappings::mapping* dormant = dormant_.of_handle(handle); dormant != nullptr) {
    if (!unmap_dormant(*dormant)) dormant_.orphan(handle);
  }
  if (backend_.release_physical(device_, handle) == backend::status::ok) {
    ++counters_.device_free;
    return;
  }
  try {
    unreleased_.push_back(handle);
  } catch (...) {
  }
}

}  // namespace fragless::core
