// Large pool, VMM mode: when reserved memory may grow. Idle cached mappings are given back
// before reserved memory passes its high-water mark (Note [Growth]), and page moves are
// paid for by pages created (Note [Move budget]).
// Invariant: reserved memory passes its high-water mark only while no idle cached
// dedicated or stitched mapping is left; with page_move_budget, a page is moved by choice
// (past the growth allowance, not for a loop plan, not under the reserved limit) only while
// the pool has moved fewer pages than it created.
// Not thread-safe: the device cache holds the device lock around every call.
#include "core/large_pool.hpp"

namespace fragless::core {

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
// repeat reuses its mappings in place with no device call; a loop whose sizes vary pays
// an unmap and a release for each mapping it gives back and a create and a map for the
// new one: four calls per huge block, however large, instead of reserving both.
// Free pages of the shared range are not given back this way: they would be created
// again by the next blocks placed there (within the growth allowance, Note [Page moves]),
// and the two would take turns every step (measured: thousands of calls per step on the
// corpus' dynamic-shape family). Memory a workload stops using goes by compaction.
void large_pool::make_room_for_growth(std::size_t bytes) noexcept {
  while (dedicated_cached_bytes_ != 0 && reserved_bytes() + bytes > reserved_high_water_bytes_) {
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

// Note [Move budget]
// Past the growth allowance (Note [Page moves]) a missing page is moved: an unmap and a map,
// no new memory. A loop whose blocks touch more distinct pages over a step than at its
// peak, and which no loop plan fits (its sizes vary from step to step, or its layout is too
// wide), then moved pages every step for ever: in the corpus' many-stream family up to
// 10,000 map/unmap calls per step, where expandable segments make none. The rule: a page
// is moved only while the pool has moved fewer pages than it has created. Creating a page
// costs two calls once (cuMemCreate, cuMemMap) and the page stays; a move costs two calls
// every time. So moving may at most double the calls creating cost; past that a missing
// page is created, and each creation buys one more move. A churning loop thus creates
// about half of what it keeps lacking in each step past the budget, until its step's pages
// stay mapped and it makes no call; reserved memory then settles at most at the pages the
// step touches over time -- the end state of page_moves:false, reached only by loops that
// churn. A workload that moves rarely (a shrinking phase, a one-off peak) keeps moving,
// and with it the lowest reserved memory. Moves that are not a choice ignore the budget:
// a loop plan's (its pages come from the loop's old ones, Note [Loop plans]), and those
// under the reserved limit or after the device refused a page; they count all the same.
// Pages created only because the budget refused a move count as churn for the loop-plan
// finder, as moves do (churn_count()), so a loop under the budget can still be planned.
// The rule is off by default (page_move_budget): measured on the shared traces it settles
// pangu_2.6B by growth (1.111x the ideal) before its loop plan forms (1.013x); the finder
// needs two steps of churn and that loop's first step already moves 2.3 pages per page
// created. On the corpus' many-stream family it cuts calls per steady step 18x for 7 %
// more reserved memory. Making the two rules cooperate is open work.
bool large_pool::move_within_budget() const noexcept {
  return !settings_.conf.page_move_budget || counters_.page_moves < pages_created_;
}

}  // namespace fragless::core
