// VMM pool: moves that leave the chunk's old mapping in place until its address is needed
// (Note [Dormant mappings]); the table itself is dormant_mappings.hpp.
// Invariant: a dormant range is unmapped to the pool (no block lies there) and maps a
// handle that is mapped elsewhere, or in transit to be, or was released while its unmap
// failed; nothing is mapped over a dormant range before it is unmapped.
// Not thread-safe: the device cache holds the device lock around every call.
#include "core/vmm_pool.hpp"

#include "core/monotonic_clock.hpp"
#include "core/segment_events.hpp"

namespace fragless::core {

// Note [Dormant mappings]
// A page move (Note [Page moves]) took two calls: unmap the idle chunk where it was, map
// it where a block lacks pages. Now the first waits. The chunk's old address range keeps
// mapping it on the device, *dormant*: to the pool those pages are unmapped like any others
// (reserved memory, placement, snapshots and the segment events all see the move as
// before), no block is handed an address there, and the chunk's memory is counted once --
// one physical allocation, two addresses. The rule: a dormant range is an unmap not yet
// made, and it is made only when it must be:
//  - before anything else is mapped over any page of the range (map_chunk);
//  - when the chunk's handle is released (compaction, empty_cache, the growth rules), so
//    released memory goes back to the device at once;
//  - when the chunk moves again, to a third place (a chunk has one dormant range at most);
//  - before a CUDA graph capture begins (begin_capture), since a capture refuses unmaps
//    (Note [Capture underway]) and a block placed over a dormant range needs one. From the
//    moment begin_capture starts until the capture ends, a move unmaps at once instead of
//    leaving a range (backend::unmaps_deferrable()): begin_capture raises the setup count
//    before it flushes, and a move reads it under the device lock that the flush of its
//    cache takes too, so a move made on another thread either reads it raised or has left
//    its range before that cache's flush runs (before, a move between the flush and the
//    capture flag left a range that a block placed over it during the capture could not
//    get);
//  - at teardown.
// And where a block lacks pages exactly where an idle, wholly free chunk lies dormant (its
// range starting at the missing run and fitting the room there), the chunk comes back for
// no call at all: the dormant range becomes its mapping again (access was granted when it
// was first mapped) and the range it leaves goes dormant instead. Two places a loop's
// blocks trade pages between -- a phase that returns, a buffer freed and made again where
// it was -- then cost nothing after the first move, where each move took an unmap and a
// map. So the pool never makes more calls than it did unmapping at once: each deferred
// unmap is made at most once, later or never, and a return adds none (it saves the map
// and the access change too). A return is no page move for the move budget (Note [Move
// budget]): it costs the device nothing, so nothing need be created to stop it. For the
// plan finder it is churn like a move (Note [Waits as churn]): the loop's layout has not
// settled, and a plan still saves it the host time of ordinary placement and the idle
// check each return makes. (Not counted, `dynamic-shapes` loops that returned chunks every
// step went unplanned: their fifth pass took 1.37x the host time, 150 of 200 seeds more
// than 1.2x; counted, 1.00x.) Seeds 1-200 of every corpus family, five repetitions: 8.9 %
// fewer device calls in all (6.6 % in the first pass; `quantized-attention` 21 %,
// `unet-resolution` 17 %), the same peaks (1.0088x -> 1.0086x the ideal) and fifth-pass
// host time -- docs/compaction.md, "Kept: deferred unmaps".
// Most deferred unmaps are still made: the address is needed while the chunk is live
// elsewhere. A chunk taken for a stitch (Note [Stitching]) leaves the range; its dormant
// range stays until the stitch releases the handle and never wakes. If unmapping a released
// handle's dormant range fails, the range stays an orphan, unmapped by the next
// compaction pass (before the release is retried) or when its address is needed.
// deferred_unmaps:false unmaps at once.
// Tried and not kept: up to 2, 4 or 16 dormant ranges per chunk, so that a chunk moved on
// to a third place could still come back to the first for no call -- 0.5-0.7 % fewer calls
// on corpus seeds 1-200, but 4.7 % more on the shared traces with four (kv-cache-inference
// 11,601 -> 15,098: more moves), single workloads swinging by a third with the bound
// (docs/compaction.md, "Tried and not kept: more than one place per chunk").
// Tried and not kept: preferring, among the chunks a move may take, one with no dormant
// range (whose move defers an unmap rather than making one): the loops stopped settling --
// 25 % more calls on the same seeds, and steady-pass calls on 652 more of them -- though
// with peaks lower (1.0086x -> 1.0066x; `many-streams` 1.0236x -> 1.0089x). And returns
// only of chunks lying above the missing run (moving down, as moves drift): `pangu_13B.csv`
// 1.036x -> 1.032x and `pangu_2.6B.csv` 1.018x -> 1.015x, but on the corpus seeds 2.2 %
// more calls (`quantized-attention` 6.6 %) for the same peaks.

bool vmm_pool::wake_dormant_chunk(std::size_t at, std::size_t run_pages, std::size_t whole_run_pages,
                                    std::size_t first, std::size_t end, backend::physical_handle* handle,
                                    std::size_t* chunk_pages) noexcept {
  const dormant_mappings::mapping* dormant = dormant_.starting_at(at);
  if (dormant == nullptr || dormant->active_head == dormant_mappings::npos) return false;
  const std::size_t head = dormant->active_head;
  const std::size_t count = dormant->pages;
  if (head < end && head + count > first) return false;  // the block's own pages
  const auto [plan_first, plan_end] = plan_pages();       // a loop plan's pages stay where the plan needs them
  if (head < plan_end && head + count > plan_first) return false;
  if (count > room_pages_at(at, run_pages, whole_run_pages)) return false;  // the room, only once a chunk is found
  if (!pages_.is_mapped(head) || pages_.chunk_head(head) != head || pages_.chunk_pages(head) != count) return false;
  if (!pages_.chunk_free(head) || !make_chunk_idle(head)) return false;
  const backend::physical_handle woken = pages_.set_unmapped(head);
  notify_segment_event(device_, segment_event_kind::unmap, pages_.page_address(head), count * pages_.page_bytes());
  dormant_.swap_with_active(at);
  pages_.set_mapped(at, count, woken);
  note_growth();  // Note [Growth]
  notify_segment_event(device_, segment_event_kind::map, pages_.page_address(at), count * pages_.page_bytes());
  counters_.dormant_returns += static_cast<std::int64_t>(count);
  *handle = woken;
  *chunk_pages = count;
  return true;
}

bool vmm_pool::leave_chunk_dormant(std::size_t head, backend::physical_handle* handle) noexcept {
  const backend::physical_handle moving = pages_.handle(head);
  const std::size_t count = pages_.chunk_pages(head);
  if (const dormant_mappings::mapping* earlier = dormant_.of_handle(moving); earlier != nullptr) {
    if (!unmap_dormant(*earlier)) return false;
  }
  if (!dormant_.add(head, count, moving, dormant_mappings::npos)) return unmap_chunk(head, handle);  // no host memory
  notify_segment_event(device_, segment_event_kind::unmap, pages_.page_address(head), count * pages_.page_bytes());
  *handle = pages_.set_unmapped(head);
  return true;
}

bool vmm_pool::unmap_dormant(const dormant_mappings::mapping& dormant) noexcept {
  const std::size_t head = dormant.head;
  const std::int64_t start = now_ns();
  if (backend_.unmap(device_, pages_.page_address(head), dormant.pages * pages_.page_bytes()) != backend::status::ok)
    return false;
  counters_.unmap_ns += now_ns() - start;
  ++counters_.unmap;
  dormant_.remove(head);
  return true;
}

backend::status vmm_pool::unmap_dormant_over(std::size_t first, std::size_t end) noexcept {
  for (const dormant_mappings::mapping* dormant = dormant_.first_overlapping(first, end); dormant != nullptr;
       dormant = dormant_.first_overlapping(first, end)) {
    if (!unmap_dormant(*dormant)) return backend::status::error;
  }
  return backend::status::ok;
}

void vmm_pool::unmap_dormant_ranges() noexcept {
  if (range_bytes_ == 0) return;
  unmap_dormant_over(0, pages_.page_count());  // a refusal leaves the rest for later
}

}  // namespace fragless::core
