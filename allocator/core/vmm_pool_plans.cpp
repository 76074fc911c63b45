// The large pool's side of loop plans: the plan's address range (over the most cached free
// pages there are, so the loop's own pages serve it) and placing blocks at their planned
// offsets (Note [Loop plans] in loop_plan.hpp); when a refused step's kept layout is taken
// (Note [Refused layouts]).
// Invariant: the plan's range is one free-index segment of its own (kPlanSegmentId), so
// ordinary placement and coalescing never cross its edges; it exists only while the plan
// places blocks (an abandoned plan's range returns to segment 0 at once). A refused layout
// is taken only at its step's start, with the move budget spent and reserved memory
// holding it beside the live blocks and the step's unplanned blocks.
// The device cache holds the device lock around every call.
#include "core/vmm_pool.hpp"
#include "core/size_classes.hpp"

namespace fragless::core {

// Note [Streams per piece]
// A plan's range is a piece segment of the free index (Note [Piece segments]): a block
// freed there stays a free range of its own, remembering only its own streams, unless a
// touching free range remembers the same streams (then they merge, as elsewhere), and a
// planned block waits for the streams of the pieces under its bytes. Merged, as ordinary
// free ranges are, the range remembered every stream that freed anywhere in it, and each
// planned block was ordered after all of them: on a many-stream loop, waits on streams
// whose work never touched the block's bytes -- device calls (an event recorded, a wait
// queued) and, on a GPU, a stream held back behind another for nothing. The pieces are
// correct as the merged range was: a block placed over pieces waits for all their streams,
// so when it is freed its own streams stand for everything earlier on its bytes. In a loop
// that follows its layout, a place's pieces are the blocks that held it in the step
// before: a planned block unions one to a few sets. Pieces stay out of best fit: ordinary
// placement never enters the range, and its scan of the size order no longer passes the
// range's ranges. Corpus, seeds 1-200 of every family, five repetitions, fragless alone:
// the figures are in docs/compaction.md ("Kept: streams remembered per piece").
backend::status vmm_pool::allocate_planned(std::uintptr_t address, std::size_t size_bytes, stream_id stream,
                                             bool* placed) {
  *placed = false;
  if (!index_.streams_across(address, size_bytes, kPlanSegmentId, &planned_wait_streams_))
    return backend::status::ok;  // the planned place is still in use: a deviation
  if (wait_forbidden(planned_wait_streams_, stream)) return backend::status::ok;
  backend::status result = place_block(address, size_bytes, planned_wait_streams_, stream, true);
  if (result == backend::status::ok) *placed = true;
  return result;
}

// Note [Loop plans], Note [Hand-over pages]: the window of `span_bytes` inside one free
// range of segment 0 whose hand-over would create the fewest pages, and among those the
// one covering the most cached free pages; nullopt when no window covers any.
std::optional<std::pair<std::uintptr_t, free_range>> vmm_pool::plan_range_over_free_pages(
    std::size_t span_bytes) const {
  const page_set& cached = pages_.cached_free_pages();
  if (cached.empty()) return std::nullopt;
  std::vector<std::size_t> cached_pages;  // ascending
  cached.append_members(cached_pages);
  const std::size_t page_bytes = pages_.page_bytes();
  const std::size_t span_pages = span_bytes / page_bytes;
  // Note [Hand-over pages]: the pages of the span needed early, and the wholly free
  // chunks a move could take (by head, ascending, with the running count of their pages).
  const std::vector<std::size_t> early = plan_.early_page_counts(page_bytes);
  const bool weigh_growth = early.size() == span_pages + 1 && early.back() != 0;
  std::vector<std::size_t> free_heads, free_ends, free_before{0};
  if (weigh_growth) {
    for (std::size_t page : cached_pages) {
      if (pages_.chunk_head(page) != page || !pages_.chunk_free(page)) continue;
      free_heads.push_back(page);
      free_ends.push_back(page + pages_.chunk_pages(page));
      free_before.push_back(free_before.back() + pages_.chunk_pages(page));
    }
  }
  std::vector<std::pair<std::size_t, std::size_t>> holes;  // unmapped runs of a range
  // The pages a window at `first` lacks and needs early, less the free chunks outside it.
  auto growth_pages = [&](std::size_t first) -> std::size_t {
    const std::size_t end = first + span_pages;
    std::size_t needed = 0;
    auto hole = std::lower_bound(holes.begin(), holes.end(), std::make_pair(first, std::size_t{0}),
                                 [](const auto& a, const auto& b) { return a.second <= b.first; });
    for (; hole != holes.end() && hole->first < end; ++hole)
      needed += early[std::min(hole->second, end) - first] - early[std::max(hole->first, first) - first];
    const auto inside_begin = static_cast<std::size_t>(
        std::upper_bound(free_ends.begin(), free_ends.end(), first) - free_ends.begin());
    const auto inside_end = static_cast<std::size_t>(
        std::lower_bound(free_heads.begin(), free_heads.end(), end) - free_heads.begin());
    const std::size_t outside =
        free_before.back() - (inside_end > inside_begin ? free_before[inside_end] - free_before[inside_begin] : 0);
    return needed > outside ? needed - outside : 0;
  };
  std::optional<std::pair<std::uintptr_t, free_range>> best;
  std::size_t best_growth = SIZE_MAX;
  std::size_t best_covered = 0;
  auto consider = [&](std::size_t first, std::size_t count, const free_range& range) {
    if (count == 0) return;
    const std::size_t growth = weigh_growth ? growth_pages(first) : 0;
    if (growth < best_growth || (growth == best_growth && count > best_covered)) {
      best_growth = growth;
      best_covered = count;
      best = std::make_pair(pages_.page_address(first), range);
    }
  };
  index_.for_each([&](const free_range& range) {
    const std::uintptr_t lowest_base = round_up(range.address, page_bytes);
    if (range.segment_id != 0 || lowest_base + span_bytes > range.address + range.size_bytes) return;
    // The windows inside the range start at pages `lowest` to `highest`.
    const std::size_t lowest = pages_.first_page(lowest_base);
    const std::size_t highest = pages_.first_page(range.address + range.size_bytes - span_bytes);
    holes.clear();
    if (weigh_growth) {
      const std::size_t limit = highest + span_pages;
      for (std::size_t page = pages_.first_unmapped(lowest, limit); page < limit;) {
        const std::size_t run_end = pages_.unmapped_run_end(page, limit);
        holes.emplace_back(page, run_end);
        page = pages_.first_unmapped(run_end, limit);
      }
    }
    // The best window starts at a cached page, or is the last the range holds (for the
    // cached pages near its end). A window starting at a cached page covers that page and
    // those up to the first at or past its end, which only moves up as the start does:
    // one pass over the range's cached pages (it was two binary searches per window, a
    // hundred microseconds and more at each plan's start on corpus programs of a few GiB).
    auto page = std::lower_bound(cached_pages.begin(), cached_pages.end(), lowest);
    auto window_end = page;
    for (; page != cached_pages.end() && *page <= highest; ++page) {
      while (window_end != cached_pages.end() && *window_end < *page + span_pages) ++window_end;
      consider(*page, static_cast<std::size_t>(window_end - page), range);
    }
    const auto last_begin = std::lower_bound(cached_pages.begin(), cached_pages.end(), highest);
    const auto last_end = std::lower_bound(last_begin, cached_pages.end(), highest + span_pages);
    consider(highest, static_cast<std::size_t>(last_end - last_begin), range);
  });
  return best;
}

// The owner's empty slabs went back (device_cache::give_plan_room_locked); placing starts
// a few events late if the owner answers only after them.
void vmm_pool::room_given() noexcept {
  plan_wants_room_ = false;
  if (plan_.plan_pending()) start_plan();
}

// Note [Waits as churn]
// A loop plan ends two costs of a loop that ordinary placement serves: pages moved every
// step (Note [Page moves]), and cross-stream waits -- best fit hands one stream's block the
// bytes another stream just freed, and the new stream then waits on an event recorded on
// the old one (Note [Stream reuse]), two calls every time, where a plan keeps each stream
// on places its own stream left (Note [Stream affinity]). PyTorch keeps each stream's
// memory apart and makes no such call. Churn counted page moves only, so a loop whose
// pages had settled but whose streams kept taking each other's bytes was never recorded:
// corpus pipeline-1f1b seed 39 made 282 records and 282 waits every step, for ever, and no
// memory call. The rule: **a cross-stream wait is churn too, priced at 1/kWaitsPerPageMove
// (1/100) of a page moved** -- an event record and a wait cost about 0.43 us on an H100
// against 46 us for moving a 2 MiB page on an H200 (unmap, map and access; the default cost
// table, bench/cost/device_call_costs.txt; the ratio matters little: at 1/25 or 1/400,
// seeds 1-200 of the four multi-stream corpus families kept every peak and call count and
// their estimated steady pass within 2 %). Recording starts at a loop's first wait as at
// its first move, a step that waited is planned, and its waits pay rent toward the
// hand-over (Note [Loop plans]). Three things stay about moves alone:
//  - the width a layout may take past the step's peak is what the step moved (what the
//    move budget would otherwise create), not what it waited;
//  - a whole log of waits without a plan does not mark planning failed (the move budget
//    is about moves), and recording then waits for a page move;
//  - a plan paid for by waits alone sets no new peak: it starts only where its span, and
//    what the step's unplanned blocks grew by since its last try, fit in the memory no
//    live block holds (room_below_peak_bytes()); else it waits a step, without granting
//    the growth allowance (Note [Page moves], for loops that move while their plan waits).
//    Without this, corpus moe-routing seeds at 1.000x the ideal took plans whose range held
//    every free page, and a slab then took one page more: seed 18 1.000x -> 1.071x.
// Seeds 1-100 of every family, five repetitions, fragless alone, records and waits in the
// fifth pass (simcuda's counts): pipeline-1f1b 16,795 -> 2,783, moe-routing 5,996 ->
// 4,778, sharded-data-parallel 2,756 -> 2,686, many-streams unchanged (its loops moved
// pages, and were planned, before); every peak the same; docs/compaction.md ("Kept: waits
// as churn") has the corpus figures and the price, layouts waited for in early passes.
void vmm_pool::start_plan() noexcept {
  const std::size_t span_bytes = round_up(plan_.plan_span_bytes(), pages_.page_bytes());
  std::optional<std::pair<std::uintptr_t, free_range>> place;
  try {
    if (plan_range_bytes_ == 0 && span_bytes != 0) place = plan_range_over_free_pages(span_bytes);
  } catch (...) {
    // no host memory for the page list: the top of the free address space, as below
  }
  if (!place && plan_range_bytes_ == 0) {
    std::optional<free_range> top = index_.highest();
    if (top) place = std::make_pair(round_up(top->address, pages_.page_bytes()), *top);
  }
  if (!place || place->second.segment_id != 0 || span_bytes == 0 ||
      place->first + span_bytes > place->second.address + place->second.size_bytes) {
    plan_.reject();  // no address space (or an earlier range could not be dissolved)
    return;
  }
  const std::uintptr_t base = place->first;
  // Note [Waits as churn]: a plan paid for by waits alone sets no new peak.
  const std::size_t unplanned_growth_bytes =
      unrecorded_high_since_try_bytes_ - std::min(unrecorded_high_since_try_bytes_, unrecorded_at_try_bytes_);
  unrecorded_high_since_try_bytes_ = unrecorded_at_try_bytes_ = unrecorded_live_bytes_;
  if (!plan_.hand_over_paid_by_moves() &&
      room_below_peak_bytes() < span_bytes + round_up(unplanned_growth_bytes, pages_.page_bytes())) {
    plan_.postpone();
    return;
  }
  // Note [Loop plans]: a hand-over that moves more than the loop churned without the plan
  // waits, and the loop's churn meanwhile pays toward it.
  const std::size_t missing_bytes =
      pages_.unmapped_pages(base, span_bytes, SIZE_MAX) * pages_.page_bytes();
  if (missing_bytes > plan_.hand_over_allowance_bytes()) {
    plan_.postpone();
    return;
  }
  try {
    index_.carve(base, span_bytes);
    index_.insert(free_range{base, span_bytes, kPlanSegmentId, place->second.streams});
  } catch (...) {
    plan_.reject();
    return;
  }
  plan_base_ = base;
  plan_range_bytes_ = span_bytes;
  plan_.activate();
}

// Note [Refused layouts]
// A step whose layout is too wide (Note [Loop plans]) is refused because the layout would
// hold more memory than the loop costs without a plan, and the move budget (Note [Move
// budget]) then lets the loop create what it keeps lacking. But the budget does not stop at
// the layout's width: where a whole program repeats as one step, it created up to 1.38x
// the live peak for steps whose refused layout spanned 1.12x (corpus quantized-attention
// seeds 180 and 907; many-streams seed 396: 1.43x for a layout of 1.10x), and what it has
// created is the peak. So the layout is kept with the refusal (a step found again after the
// program left it is followed without one, as it is not laid out again), and reserved
// memory decides:
//  - at each start of the refused step (the event where its placing would start), when the
//    budget is spent -- the next page a block lacks would be created -- and the memory no
//    live block holds (cached free pages, idle mappings, and growth up to the high-water
//    mark, which sets no new peak) holds the layout, the step becomes a plan with that
//    layout and hands over as any plan does (Note [Loop plans]), moving its pages in;
//  - otherwise the pool notes what reserved memory must reach for that: what live blocks
//    held at the step's start plus what the layout needs. While the program keeps to the
//    step, the budget creates no page past it: a missing page is moved instead (the
//    layout's cost, not charged to the budget, as a plan's moves are not), and at the next
//    start the layout fits.
// What the layout needs is its span and, beside it, room for the step's blocks that no
// plan places (slabs and the exact start's small blocks, Note [Exact start]): what they
// grew by over a step since the step was found. Without that room a layout as wide as the
// free memory was taken, those blocks took a new page beside it, and its map and unmap were
// made every pass (kv-cache-eviction seed 37, 13 seeds of that family).
// So reserved memory ends near the lower of the budget's end state (it settles below the
// layout's memory, which is then never taken) and the layout's. Corpus, 1,000 seeds a
// family, five repetitions, fragless alone: many-streams 1.0437x -> 1.0410x the ideal,
// kv-cache-eviction 1.0678x -> 1.0638x, quantized-attention 1.0302x -> 1.0292x (103 seeds
// better by more than 1 %, one worse: kv seed 426 1.054x -> 1.071x; many-streams seed 396
// 1.431x -> 1.105x); the eight other families the same to the seed. The hand-over falls a
// step or two after the refusal, so 37 more seeds make calls in the fifth pass (fifth-pass
// calls 22,338 -> 25,290); five checked make none from the sixth or seventh. Taking the
// layout at the refusal itself when the budget would create its memory within a step (at
// half the step's churn) settled those a pass earlier, but took layouts the budget would
// have stayed below: 66 kv-cache-eviction seeds worse. docs/compaction.md has the figures.
void vmm_pool::weigh_refused_layout() noexcept {
  if (!plan_.refused_layout_kept()) {
    refused_layout_target_bytes_ = 0;
    // Measured from the step's discovery on (a plan follows it from there).
    if (!plan_.active()) {
      unrecorded_high_water_bytes_ = unrecorded_at_start_bytes_ = unrecorded_live_bytes_;
      unrecorded_step_growth_bytes_ = 0;
    }
    return;
  }
  const std::size_t page_bytes = pages_.page_bytes();
  // Beside the layout, the step's blocks that no plan places need what they grew by in the
  // last step, or in this one so far.
  const std::size_t growth_bytes = std::max(
      unrecorded_step_growth_bytes_, unrecorded_high_water_bytes_ - std::min(unrecorded_high_water_bytes_, unrecorded_at_start_bytes_));
  const std::size_t needed_bytes = round_up(plan_.refused_span_bytes(), page_bytes) + round_up(growth_bytes, page_bytes);
  const std::size_t reserved = reserved_bytes();
  const std::size_t free_bytes = mapped_cached_bytes();
  if (plan_.at_step_start()) {
    refused_held_at_start_bytes_ = reserved - std::min(reserved, free_bytes);
    unrecorded_step_growth_bytes_ = growth_bytes;
    unrecorded_high_water_bytes_ = unrecorded_at_start_bytes_ = unrecorded_live_bytes_;
    // The budget is spent: the next page a block lacks would be created, not moved.
    if (!move_within_budget() && room_below_peak_bytes() >= needed_bytes) {
      refused_layout_target_bytes_ = 0;
      plan_.take_refused_layout();
      return;
    }
  } else if (refused_layout_target_bytes_ == 0) {
    refused_held_at_start_bytes_ = reserved - std::min(reserved, free_bytes);  // refused mid-step: a first bound
  }
  refused_layout_target_bytes_ = refused_held_at_start_bytes_ + needed_bytes;
}

std::size_t vmm_pool::room_below_peak_bytes() const noexcept {
  const std::size_t reserved = reserved_bytes();
  return mapped_cached_bytes() + (reserved_high_water_bytes_ - std::min(reserved_high_water_bytes_, reserved));
}

void vmm_pool::dissolve_plan_range() noexcept {
  if (plan_range_bytes_ == 0 || plan_.active()) return;
  // Every free piece of the range joins segment 0 (and merges with its neighbours there);
  // blocks still live in it go back to segment 0 when freed.
  const std::uintptr_t end = plan_base_ + plan_range_bytes_;
  try {
    std::vector<free_range> pieces;
    index_.for_each([&](const free_range& range) {
      if (range.segment_id == kPlanSegmentId && range.address >= plan_base_ && range.address < end)
        pieces.push_back(range);
    });
    for (free_range& piece : pieces) {
      index_.carve(piece.address, piece.size_bytes);
      piece.segment_id = 0;
      index_.insert(std::move(piece));
    }
  } catch (...) {
    return;  // no host memory: stays a plan range (ordinary placement skips it), tried again later
  }
  plan_base_ = 0;
  plan_range_bytes_ = 0;
}

}  // namespace fragless::core
