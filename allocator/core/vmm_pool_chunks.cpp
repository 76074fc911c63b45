// VMM pool: where the chunk behind a missing run of pages comes from -- an idle cached free
// chunk moved from elsewhere in the range or a new one created (Note [Page moves]), a
// dormant mapping woken (Note [Dormant mappings]), a free chunk too large to move given
// back first (Note [Chunks given back]) -- and a chunk mapped, unmapped and released.
// Invariant: a chunk moved or released is one no stream can still touch; every handle taken
// off a page is mapped again, released, or queued in unreleased_ for a later retry.
// Not thread-safe: the device cache holds the device lock around every call.
#include "core/vmm_pool.hpp"

#include "backend/capture_aware_backend.hpp"
#include "core/monotonic_clock.hpp"
#include "core/segment_events.hpp"

namespace fragless::core {
namespace {

// How many cached free chunks an allocation inspects before creating a new one instead
// (with chunks a candidate often does not fit: at a fraction of 1/16, 8 left pangu_2.6B at
// 1.166x the ideal and an unbounded search at 1.093x; at 1/256, 64 and unbounded both 1.022x).
constexpr int kMoveCandidates = 64;

}  // namespace

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
