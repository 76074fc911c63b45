// Loop plans: which pages of a plan's span its first step needs while blocks made before
// the plan are still live (Note [Hand-over pages]; see loop_plan.hpp for the rest).
// Invariant: reads the plan only; the counts cover exactly the span's pages.
#include <algorithm>

#include "core/loop_plan.hpp"

namespace fragless::core {

// Note [Hand-over pages]
// A plan starts where its step has the least live bytes, but some blocks of the loop made
// before the plan are usually still live there, outside the plan's range (the layer input
// that every layer of a stack frees only after making the next one). The pages the range
// lacks are moved in from idle free chunks outside it (Note [Page moves]), and what no
// such chunk supplies is created: reserved memory grows by it, for good. The blocks made
// before the plan free their pages during the first planned step, so a page the step
// first needs after the last of them is freed can be moved from theirs; a page it needs
// before can come only from chunks free at the start. So the range goes where the pages
// it lacks and needs early, less the pages of the wholly free chunks outside it, are
// fewest -- an estimate of the pages the hand-over must create (it does not ask whether
// those chunks' streams are done, nor how they fit the runs) -- and among such places,
// where it covers the most cached free pages (the loop's own pages, free at that moment:
// fewest moves), as before (vmm_pool::plan_range_over_free_pages). A range that covers no
// cached page is not weighed: allowed, a range at the top of the address space, away from
// the loop's pages, left corpus quantized-attention seed 130 at 1.16x the ideal instead of
// 1.004x. Without the first rule, corpus quantized-attention seed 132's plan over some
// of a batch's layers (a 1,367-page span, 1,141 of its pages needed early) took the
// window covering all 1,181 cached free pages, whose 186 holes its first block needed
// while the previous layer's output (455 MiB) was still live outside the range: 180 pages
// created, 1.16x the ideal. The window 188 pages higher covers 993 cached pages and lacks
// 374: the 188 needed early can be moved from the free chunks below it, the rest once
// that output is freed: 1.03x.
std::vector<std::size_t> loop_plan::early_page_counts(std::size_t page_bytes) const {
  const std::size_t span_pages = (span_bytes_ + page_bytes - 1) / page_bytes;
  std::vector<std::size_t> counts(span_pages + 1, 0);
  if (plan_.empty() || page_bytes == 0) return counts;
  // The allocations the first step makes before its last free of a block made before it.
  std::size_t allocations = 0, early_allocations = 0;
  for (std::size_t step = 0; step < plan_.size(); ++step) {
    const loop_token& token = plan_[(start_phase_ + step) % plan_.size()].token;
    if (token.size_bytes != 0) ++allocations;
    else if (token.age > allocations) early_allocations = allocations;
  }
  // Pages those allocations lie on: +1 where a block's pages begin, -1 past their end.
  std::vector<std::int64_t> starts(span_pages + 1, 0);
  allocations = 0;
  for (std::size_t step = 0; step < plan_.size() && allocations < early_allocations; ++step) {
    const planned_token& planned = plan_[(start_phase_ + step) % plan_.size()];
    if (planned.token.size_bytes == 0) continue;
    ++allocations;
    if (planned.offset_bytes < 0) continue;  // left out (Note [Mapped blocks in a plan])
    const auto offset = static_cast<std::size_t>(planned.offset_bytes);
    const std::size_t first = std::min(span_pages, offset / page_bytes);
    const std::size_t end = std::min(span_pages, (offset + planned.token.size_bytes + page_bytes - 1) / page_bytes);
    if (first >= end) continue;
    ++starts[first];
    --starts[end];
  }
  std::int64_t covering = 0;
  for (std::size_t page = 0; page < span_pages; ++page) {
    covering += starts[page];
    counts[page + 1] = counts[page] + (covering > 0 ? 1 : 0);
  }
  return counts;
}

}  // namespace fragless::core
