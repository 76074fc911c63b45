// VMM pool: when reserved memory may grow. Idle cached mappings are given back
// before reserved memory passes its high-water mark (Note [Growth]), page moves are
// paid for by pages created (Note [Move budget]), and a created chunk's size is capped
// (chunk_cap_pages; Note [Physical chunks] in vmm_pool_pages.cpp, Note [First growth],
// Note [Pinned pages]).
// Invariant: reserved memory passes its high-water mark only while no idle cached
// dedicated or stitched mapping is left; once loop planning has failed, a page is moved by
// choice (past the growth allowance, not for a loop plan, not under the reserved limit)
// only while the pool has moved fewer pages by choice than it created (page_move_budget),
// or, for a loop whose refused layout is kept, once reserved memory holds that layout
// (Note [Refused layouts], take_chunk); a created chunk has at most chunk_cap_pages()
// pages, which count physical_chunk_first_growth_bytes only until the pool first frees a
// block, and, from that free on, at most one more than the pinned-page budget has left, or
// half the run's share; a block's edge pages join its run only when the run, with them,
// fits one chunk -- before that free, when it is at most 4 pages (edge_pages_join_run).
// Not thread-safe: the device cache holds the device lock around every call.
#include "core/vmm_pool.hpp"
#include "core/size_classes.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace fragless::core {

namespace {
// Note [First growth]: a chunk made before the first free is at most 1/this of reserved memory.
constexpr std::size_t kFirstGrowthReservedShare = 16;
// Note [First growth]: before the first free, a run of at most this many missing pages
// takes its block's edge pages into its chunks.
constexpr std::size_t kFirstGrowthEdgeRunPages = 4;
}  // namespace

// Note [Growth]
// A dedicated or stitched mapping, once freed, stays mapped for a request of exactly its
// rounded size (Note [Dedicated mappings]). Tensors whose size changes from step to step
// (volumetric models, variable batch or sequence length) never ask for that size again:
// each step then created new mappings beside the cached ones, and reserved memory reached
// 1.7-3x the live peak in the corpus' huge-tensor family. The rule: reserved memory grows
// past its high-water mark only when no idle cached mapping is left to give back. Before a
// new dedicated mapping, and before a new page of the shared range or of a stitch, idle
// cached mappings (no stream can still touch them: pooled event queries, no device
// synchronization) are released, largest first -- the fewest calls per byte -- until the
// growth fits under the mark. Below the mark nothing is released, so a loop whose sizes
// repeat reuses its mappings in place with no device call. A mapping given back costs an
// unmap and a release, and the memory is made again as pages of the shared range, where a
// huge request whose size varies goes (below).
// Free pages of the shared range are not given back this way: they would be created
// again by the next blocks placed there (within the growth allowance, Note [Page moves]),
// and the two would take turns every step (measured: thousands of calls per step on the
// corpus' dynamic-shape family) -- except a wholly free chunk too large to be moved where
// a run lacks pages, given back only where creating would pass the mark (Note [Chunks
// given back], vmm_pool_chunks.cpp). The shared range is instead where huge blocks go once
// their sizes take turns: its pages serve a block of any size, a mapping only its own.
// So a huge request (at least dedicated_mapping_threshold_bytes) that no cached mapping
// fits exactly gets a mapping of its own only when its memory is new -- it would pass the
// mark, no idle cached mapping is left to give back, and the shared range has no free
// page (huge_block_goes_shared). Otherwise it is placed in the shared range like any
// block, taking free pages (moves and creations, Note [Page moves]) at one map call per
// chunk rather than per mapping:
//  - when the shared range's cached free pages could hold it: free memory is used before
//    new memory is made beside it;
//  - when a mapping of its own would stay below the mark: that memory is there to be
//    reused, and as a mapping only a request of this exact size could reuse it -- while
//    the shared range, growing later in the step, would give it back (four calls every
//    step for as long as the loop runs);
//  - when a mapping had to be given back to make room: its memory becomes pages;
//  - when its mapping would set a new peak while the shared range has a free page: a
//    mapping of its own would leave those pages idle at the new peak.
// Measured on 1,000 corpus seeds per family (five repetitions): seeds making device calls
// in the last pass where PyTorch's allocator makes none 1,152 -> 680 (huge-tensors 345 ->
// 43, dynamic shapes 162 -> 52), their calls 111,278 -> 66,618; first-pass calls +1.9 %;
// estimated steady-pass time 1.58x -> 1.32x PyTorch's; the ideal's geometric mean 1.023x
// either way (the README's corpus tables). The earlier rule (a mapping of its own
// whenever it stayed below the mark) left 376 seeds re-creating mappings every step.
void vmm_pool::make_room_for_growth(std::size_t bytes) noexcept {
  while (dedicated_cached_bytes_ != 0 && growth_passes_mark(bytes)) {
    std::uintptr_t largest = 0;
    std::size_t largest_bytes = 0;
    for (const auto& [base, mapping] : dedicated_) {
      if (mapping.in_use || mapping.bytes <= largest_bytes) continue;
      if (!streams_idle(mapping.streams)) continue;
      largest = base;
      largest_bytes = mapping.bytes;
    }
    if (largest_bytes == 0 || !release_dedicated(largest)) return;  // none idle, or a call failed
  }
}

// Note [Growth]: where a huge request goes when no cached mapping fits it exactly.
bool vmm_pool::huge_block_goes_shared(std::size_t size_bytes) noexcept {
  const std::size_t bytes = round_up(size_bytes, pages_.page_bytes());
  for (const auto& [base, mapping] : dedicated_)
    if (mapping.fits_exactly(bytes)) return false;  // reused in place
  const bool free_pages_hold_it = pages_.cached_free_pages().size() * pages_.page_bytes() >= bytes;
  if (free_pages_hold_it || !growth_passes_mark(bytes)) return true;
  const std::size_t cached_before_bytes = dedicated_cached_bytes_;
  make_room_for_growth(bytes);
  return dedicated_cached_bytes_ != cached_before_bytes || !pages_.cached_free_pages().empty();
}

// Note [Move budget]
// Past the growth allowance (Note [Page moves]) a missing page is moved: an unmap and a map,
// no new memory. A loop whose blocks touch more distinct pages over a step than at its
// peak is first offered a loop plan (Note [Loop plans]), which lays the step out within
// its old pages. A loop no plan fits (its sizes vary from step to step, or its layout is
// too wide) moved pages every step for ever: in the corpus' many-stream family up to
// 10,000 map/unmap calls per step, where expandable segments make none. The rule: while
// planning has failed -- the program keeps to a step whose layout was too wide (from a
// whole step after its refusal on, below), or (for good) a plan found no address range or
// a whole log passed without a plan (loop_plan::planning_failed(); always, with plans
// off) -- a page is moved only while the pool has moved fewer pages than it has created.
// Only the loop that was refused is budgeted: a program whose shapes change from phase to
// phase (batches of other lengths) moves pages at each change, and budgeted from its
// first refused step on, it created them instead, phase after phase (corpus
// quantized-attention 1.067x the ideal then, 1.036x later; an abandoned plan counted as a
// failure too: 1.093x; docs/compaction.md).
// And it is budgeted only once the program has followed the refused step a whole step
// (loop_plan::planning_failed()): a loop refused as too wide may be a phase about to end
// (one batch's layers), whose missing pages a move serves with no new memory; budgeted at
// the refusal, the moves the pool had made before the loop was found paid for creating
// pages, which stay (corpus quantized-attention seed 920: 35 pages created for a layer of
// a batch while 218 cached pages were free, 1.31x the ideal; 1.04x now). A loop that
// keeps to its step is budgeted a step later, and settles a step or two later.
// Creating a page costs two calls once (cuMemCreate, cuMemMap) and the page stays; a
// move costs two calls every time. So moving may at most double what creating cost; past
// that a missing page is created, and each creation buys one more move. A churning loop thus creates about half of what it keeps
// lacking in each step past the budget, until its step's pages stay mapped and it makes
// no call; reserved memory settles at most at the pages the step touches over time -- the
// end state of page_moves:false, reached only by loops that churn and that no plan fits.
// A workload that moves rarely (a shrinking phase, a one-off peak) keeps moving, and with
// it the lowest reserved memory. For a loop whose refused layout is kept, the budget stops
// creating where reserved memory holds that layout, which is then taken (Note [Refused
// layouts] in vmm_pool_plans.cpp). Moves that are not a choice ignore the budget: those
// under the reserved limit or after the device refused a page count against it; a loop
// plan's do not count at all -- they are the plan's one-off cost of laying its step out
// (a hand-over moves the loop's whole working set), bounded because only a longer step is
// planned after an abandoned plan. Charged to the budget, an abandoned plan's moves left a
// debt the pool then repaid by creating as many pages: pipeline-1f1b seed 57 of the corpus
// reached 1.05x its live peak with pages and 1.37x with physical chunks (1.007x and 1.023x
// then). That seed was planned over a layer inside its step, because its huge blocks were
// not tokens; since every request is one (Note [Loop plans]) it is planned over its whole
// step, and on 200 corpus seeds per family charging a plan's moves changed no peak (two
// passes with pages or chunks, five with chunks): no seed abandons a plan after a costly
// hand-over now, but the rule stays what a hand-over should cost. A move counts the pages
// the block lacked, not a larger chunk's surplus (Note [Physical chunks]), so chunks and
// pages are charged alike. Pages created only because the budget refused a move count as churn
// for the plan finder, as moves do (churn()), so such a loop can still be planned
// later. Waiting for planning to fail matters: charged from the start, the budget settled
// pangu_2.6B by growth (1.111x the ideal) before its plan formed (1.013x) -- that loop's
// first step already moves 2.3 pages per page created. Measured (3 corpus seeds per
// family, before huge requests went to the shared range): many-stream steady-pass calls
// 14,600 -> 2,700 for 1.040x -> 1.108x the ideal, KV-cache eviction 362 -> 18 for 1.058x
// -> 1.077x; every shared trace unchanged.
// page_move_budget:false moves whenever past the allowance.
bool vmm_pool::move_within_budget() const noexcept {
  return !settings_.conf.page_move_budget || !plan_.planning_failed() || pages_moved_ < pages_created_;
}

// Note [Physical chunks]: the pages a created chunk backing a run of `run_pages` may have.
std::size_t vmm_pool::chunk_cap_pages(std::size_t run_pages) const noexcept {
  const double fraction = settings_.conf.physical_chunk_fraction;
  if (fraction <= 0.0) return 1;
  const auto pages = static_cast<std::size_t>(static_cast<double>(reserved_bytes()) * fraction /
                                              static_cast<double>(pages_.page_bytes()));
  const double run_fraction = settings_.conf.physical_chunk_run_fraction;
  const std::size_t run_share_pages =
      run_fraction > 0.0 ? static_cast<std::size_t>(std::ceil(static_cast<double>(run_pages) * run_fraction)) : 0;
  // Note [First growth]: before the first free, a chunk may also reach the first-growth
  // size, or 1/16 of reserved memory where that is less.
  const std::size_t first_growth_pages =
      !first_growth() ? 0
                      : std::min(settings_.conf.physical_chunk_first_growth_bytes,
                                 reserved_bytes() / kFirstGrowthReservedShare) / pages_.page_bytes();
  const std::size_t cap = std::max<std::size_t>(
      {1, pages, run_share_pages, first_growth_pages, settings_.conf.physical_chunk_min_bytes / pages_.page_bytes()});
  if (cap == 1) return cap;
  // Note [Pinned pages]: no more than the pinned-page budget has left, but never fewer than
  // half the run's share.
  const auto half_run_share_pages =
      static_cast<std::size_t>(std::ceil(static_cast<double>(run_pages) * run_fraction / 2.0));
  return std::min(cap, std::max(pinned_budget_cap_pages(), half_run_share_pages));
}

// Note [Pinned pages]
// A chunk is mapped, moved and released only whole (Note [Physical chunks]), so once a
// block is placed on part of a wholly free chunk -- its pages reused in place -- the
// chunk's other free pages are pinned: no move can take them where a block lacks pages
// and no release can give them back until every block on the chunk is gone. The caps of
// Note [Physical chunks] bound what one chunk can pin, not what all of them pin together,
// and at the generated corpus' peaks pinned pages were most of what fragless reserved
// above the ideal: of the 152 seeds then above 1.03x the ideal where the packer reaches
// 1.01x (of 12,809), one page per allocation brought 100 within 1.03x (at 4.6x their
// device calls). The rule:
// the free pages of chunks that still have a live page are a budget,
// physical_chunk_pinned_fraction (1/100) of reserved memory, and a created chunk -- which
// could later pin all its pages but one -- has at most one page more than the budget has
// left, down to a single page, which pins nothing and is moved on its own. While few pages
// are pinned the caps alone decide; as the pinned pages near the budget new chunks
// shrink; once the blocks on pinned chunks are gone, chunks grow again. A block's run
// still takes at most 2/physical_chunk_run_fraction chunks (64): the budget never cuts a
// chunk below half the run's share, since a block large next to reserved memory cut into
// single pages costs hundreds of calls (the reason for the run's share). Before the pool
// first frees a block nothing is pinned, and the budget does not apply: the first-growth
// caps decide (Note [First growth]). It applied there at first, since the first step's
// temporaries are among those chunks (exempted then, the budget saved 72 of the 152 seeds
// instead of 97); but 1/100 of the memory reserved while a program grows from nothing cut
// its first gigabytes into chunks of a few pages -- 188 of the 635 chunks of corpus
// activation-recompute seed 17 (9.3 GiB), whose whole first pass expandable segments map in
// 478 pages. Applied only after the first free, and with edge pages joining runs that fit
// one chunk after it (Note [Physical chunks]), seeds 1-200 of every family (five
// repetitions) met the calls goal -- first-pass calls at most expandable segments' -- on
// 730 of 2,800 instead of 562, the memory goal on 2,709 instead of 2,731 (the budget's
// part: 638 and 2,726; docs/compaction.md, "Edge pages and first growth under the
// budget"). A moved chunk's surplus obeys the same cap (it lands free beside a live block,
// room_pages_at).
// The count (page_map::pinned_free_pages) is one pass over the cached free pages, a chunk
// at a time, made the first time the caps would let one of a block's chunks be larger than
// a page, and kept for the rest of that block's mapping (creating and moving add no free page to a partly live
// chunk then, save a moved chunk's surplus, which is added): counted for every chunk, it
// cost 8 % of host time per operation on the corpus. Outside a block's mapping the
// budget is not applied: a stitch takes its pages one at a time anyway.
// Measured on the 152 seeds (five repetitions): 97 within 1.03x, at 1.25x their device
// calls (1.59x with no floor at half the run's share, 1.12x and 72 seeds with the floor at
// the whole share); budgets of 1/200 and 1/50: 100 seeds at 2.07x, 77 at 1.17x (no floor).
// On seeds 1-200 of every family: such seeds 36 -> 16, first-pass calls +18 %; on 1,000
// seeds of every family 152 -> 58, first-pass calls 21.6 -> 25.3 million (1.38x -> 1.62x
// expandable segments'); docs/compaction.md, "A budget for pinned pages".
std::size_t vmm_pool::pinned_budget_cap_pages() const noexcept {
  const double fraction = settings_.conf.physical_chunk_pinned_fraction;
  // Outside a block's mapping (a stitch's pages, taken one at a time) there is nothing to
  // cut; before the pool first frees a block nothing is pinned (Note [Pinned pages]).
  if (fraction <= 0.0 || !in_map_missing_pages_ || !freed_a_block_) return SIZE_MAX;
  const auto budget_pages = static_cast<std::size_t>(static_cast<double>(reserved_bytes()) * fraction /
                                                     static_cast<double>(pages_.page_bytes()));
  std::size_t pinned = pinned_free_pages_in_call_;
  if (pinned == kPinnedUncounted) pinned = pinned_free_pages_in_call_ = pages_.pinned_free_pages();
  return pinned >= budget_pages ? 1 : budget_pages - pinned + 1;
}

bool vmm_pool::first_growth() const noexcept {
  return !freed_a_block_ && settings_.conf.physical_chunk_fraction > 0.0 &&
         settings_.conf.physical_chunk_first_growth_bytes >= pages_.page_bytes();
}

// Note [Physical chunks]: a run takes its block's edge pages when, with them, it fits one
// chunk under every cap -- before the first free, when it is at most 4 pages (Note [First
// growth]).
bool vmm_pool::edge_pages_join_run(std::size_t run_pages) const noexcept {
  if (first_growth()) return run_pages <= kFirstGrowthEdgeRunPages;
  return run_pages <= chunk_cap_pages(run_pages);
}

// Note [First growth]
// The caps of Note [Physical chunks] bound the free pages a chunk can hold once some of its
// pages are free again; until a block of the pool is first freed, no page of any chunk is
// free (a created chunk covers only pages its block fills), so they guard against nothing
// yet and only cut the program's first blocks -- weights, buffers, state, made before a
// step frees anything -- into one-page chunks while reserved memory is small: chunks cut
// short by a cap were 61-73 % of the creations (seeds 1-20 of four corpus families, a
// temporary count). So until the pool first frees a block, a created chunk may also be
// physical_chunk_first_growth_bytes (20 MiB, expandable segments' unit, by default), and no
// more than 1/kFirstGrowthReservedShare (1/16) of the memory reserved when it is made; the
// first free (vmm_pool::release) ends that for good. Not without limits: the blocks made
// before the first free include the first step's temporaries, freed soon after, whose
// chunks later hold free pages where smaller blocks come back to their memory. Uncapped,
// such a chunk (corpus quantized-attention seed 48: 474 MiB, made for a score block) held
// free pages that no move could take, 1.015x -> 1.389x the ideal; at 20 MiB a chunk made
// then holds at most what one of expandable segments' pages can; and the share of reserved
// memory keeps it small next to a small program, where 20 MiB alone put the peaks of 51 of
// seeds 1-200 of every family more than 1 % higher (24 with the share, for 3.9 % more
// first-pass calls). Measured on those seeds, five repetitions (docs/compaction.md,
// "Larger chunks before the first free"): first-pass calls -17 %, peak / ideal 1.0086 ->
// 1.0090 (geometric mean).
// The same holds for the rule that a page a block covers only in part (its first or last,
// shared with its neighbours' address space) is a chunk of its own: it keeps a freed
// block's chunk wholly free while its neighbour lives, and before the first free there is
// no freed block yet. Blocks made one after another each left such a page, so a block of
// a few pages took two or three chunks where one would do: 42 % of the chunks taken on the
// shared trace memory_snapshot_forward_without_mixed were single edge pages. So until the
// first free, a run of at most kFirstGrowthEdgeRunPages (4) missing pages takes its edge
// pages into its chunks -- a block of up to about 8 MiB is then one chunk. A longer run
// keeps them apart: what it saves is the same one chunk whatever the run's length, while
// what a live neighbour can later pin grows with the chunk (it is moved and released only
// whole). Without that bound a U-Net, whose skip activations are freed while the blocks
// made after them live on, lost its moves: corpus unet-resolution had 64 of 1,000 seeds
// more than 1 % higher (docs/compaction.md, "Edge pages before the first free", which has
// the figures for 2 to 8 pages and without the bound). After the first free the rule of
// Note [Physical chunks] takes over: a run takes its edge pages where it fits one chunk
// under the caps and the pinned-page budget. The budget itself does not apply before the
// first free (Note [Pinned pages]).

}  // namespace fragless::core
