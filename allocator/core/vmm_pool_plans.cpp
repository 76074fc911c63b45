// The large pool's side of loop plans: the plan's address range and placing blocks at
// their planned offsets (Note [Loop plans] in loop_plan.hpp).
// Invariant: the plan's range is one free-index segment of its own (kPlanSegmentId), so
// ordinary placement and coalescing never cross its edges; it exists only while the plan
// places blocks (an abandoned plan's range returns to segment 0 at once).
// The device cache holds the device lock around every call.
#include "core/vmm_pool.hpp"
#include "core/size_classes.hpp"

namespace fragless::core {

backend::status vmm_pool::allocate_planned(std::uintptr_t address, std::size_t size_bytes, stream_id stream,
                                             bool* placed) {
  *placed = false;
  std::optional<free_range> range = index_.containing(address);
  if (!range || range->segment_id != kPlanSegmentId || range->address + range->size_bytes < address + size_bytes)
    return backend::status::ok;  // the planned place is still in use: a deviation
  if (wait_forbidden(range->streams, stream)) return backend::status::ok;
  backend::status result = place_block(address, size_bytes, *range, stream, true);
  if (result == backend::status::ok) *placed = true;
  return result;
}

void vmm_pool::start_plan() noexcept {
  const std::size_t span_bytes = round_up(plan_.plan_span_bytes(), pages_.page_bytes());
  std::optional<free_range> top = plan_range_bytes_ == 0 ? index_.highest() : std::nullopt;
  const std::uintptr_t base = top ? round_up(top->address, pages_.page_bytes()) : 0;
  if (!top || top->segment_id != 0 || span_bytes == 0 || base + span_bytes > top->address + top->size_bytes) {
    plan_.reject();  // no address space (or an earlier range could not be dissolved)
    return;
  }
  try {
    index_.carve(base, span_bytes);
    index_.insert(free_range{base, span_bytes, kPlanSegmentId, top->streams});
  } catch (...) {
    plan_.reject();
    return;
  }
  plan_base_ = base;
  plan_range_bytes_ = span_bytes;
  plan_.activate();
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
