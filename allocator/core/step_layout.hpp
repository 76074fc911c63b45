// Step layout: the offline half of a loop plan (Note [Loop plans] in loop_plan.hpp). Given
// the blocks of one step -- sizes and lifetimes, which may wrap past the step's end -- it
// gives every block an offset so that no two blocks whose lifetimes meet overlap, trying
// several orders, keeping the narrowest layout (Note [Layout orders]), refining it (Note
// [Layout refinement]) and, where it is still wider than the step's peak, searching once
// more (Note [Skyline layout], skyline_layout.hpp), laying it out as a ring (Note [Ring
// layout], ring_layout.hpp) and then doing it all on the step run backwards (Note [Time
// reversal]); where the narrower is still above the peak, repairing it (Note [Layout
// repair], layout_repair.hpp); last, within the span found, moving blocks to places their
// own stream left (Note [Stream affinity], stream_affinity.hpp).
// Invariant: a layout returned places each block at or above offset 0, ends at the span it
// returns, and overlaps no block whose lifetime meets its own; the same blocks give the
// same layout, on one thread or several; refining, the search, the ring, the repair and
// stream affinity never widen a layout.
// Plain C++, no device calls, no shared state: the caller owns the blocks.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <vector>

namespace fragless::core {

// A block of the step: lives over [first_begin, first_end) and, when its lifetime wraps
// past the step's end, also over [0, second_end). Phases are below 2^32. `from_start` is
// first_begin counted from the phase where placing starts (the step's least-live event),
// for the orders that follow the step. `offset_bytes` is the layout's answer.
struct step_block {
  std::size_t phase;
  std::size_t size_bytes;
  std::size_t first_begin, first_end, second_end;
  std::size_t offset_bytes = 0;
  std::size_t from_start = 0;
  std::uint32_t stream_index = 0;  // which of the step's streams makes it (Note [Stream affinity])
  std::size_t lifetime() const noexcept { return first_end - first_begin + second_end; }
};

// Whether two lifetimes [begin, end) + [0, second_end) meet (share a phase), each given
// as (first_begin, first_end, second_end); phases are below 2^32. The one test of every
// layout (the greedy orders' scan and the skyline search).
inline bool lifetimes_meet(std::uint32_t a_begin, std::uint32_t a_end, std::uint32_t a_second_end, std::uint32_t b_begin,
                           std::uint32_t b_end, std::uint32_t b_second_end) noexcept {
  return (a_begin < b_end && b_begin < a_end) || a_begin < b_second_end || b_begin < a_second_end ||
         (a_second_end > 0 && b_second_end > 0);
}

// Note [Layout orders]: the orders a step is laid out in; the narrowest layout wins, and on
// equal spans the earlier one in this list.
enum class layout_order {
  size_then_lifetime,   // largest first; longer lifetimes first among equal sizes
  size_then_start,      // largest first; earlier starts first among equal sizes
  step,                 // as the step makes them, from where placing starts
  size_class_then_step  // by power-of-two size class, largest first; then as the step makes them
};
inline constexpr layout_order kLayoutOrders[] = {layout_order::size_then_lifetime, layout_order::size_then_start,
                                                 layout_order::step, layout_order::size_class_then_step};

inline constexpr std::size_t kLayoutOrderCount = std::size(kLayoutOrders);

// Note [Layout race]: the spans of the orders laid out so far, shared by the orders of one
// step; an order stops where it can no longer win.
struct layout_race {
  static constexpr std::size_t kRunning = SIZE_MAX;
  static constexpr std::size_t kBeaten = SIZE_MAX;  // what a stopped order returns
  std::atomic<std::size_t> finished_spans[kLayoutOrderCount];
  // The step's peak: no layout is narrower, so an order finished there beats every later
  // order before it places a block. 0 where unknown.
  std::size_t floor_bytes = 0;
  layout_race() noexcept {
    for (std::atomic<std::size_t>& span : finished_spans) span.store(kRunning, std::memory_order_relaxed);
  }
  // Whether an order whose layout spans `partial_span` so far can no longer be taken.
  bool beaten(std::size_t order_index, std::size_t partial_span) const noexcept;
};

// The placing sequence of `order`: indices into `blocks`, each once.
std::vector<std::size_t> placing_order(const std::vector<step_block>& blocks, layout_order order);

// Lays the blocks out in one order: sets every block's offset and returns the span.
// Returns 0 at once when `cancel` is set (Note [Layout threads] in loop_plan_layout.cpp).
std::size_t lay_out(std::vector<step_block>& blocks, layout_order order, const std::atomic<bool>* cancel);
// The same with the placing sequence given: indices into `blocks`, each once.
// With `race`, stops as order `order_index` once it cannot win and returns kBeaten (its
// offsets then are partial).
std::size_t lay_out_in(std::vector<step_block>& blocks, const std::vector<std::size_t>& order,
                       const std::atomic<bool>* cancel, const layout_race* race = nullptr,
                       std::size_t order_index = 0);

// Note [Layout threads] (loop_plan_layout.cpp): a step of at least this many blocks is laid out
// on threads of its own while the loop goes on; a smaller one on the allocating thread,
// whose time its refinement spends (Note [Layout refinement]).
inline constexpr std::size_t kLayoutThreadBlocks = 256;

// How the step's live bytes change at each of its `phases` phases (one entry more, for the
// ends at the step's end). Precondition: every block's lifetime is known and within them.
std::vector<std::int64_t> step_live_changes(const std::vector<step_block>& blocks, std::size_t phases);
// The most bytes the step's blocks hold at once: no layout is narrower.
std::size_t step_peak_bytes(const std::vector<step_block>& blocks);
// Where placing starts (Note [Loop plans]): after the first event that leaves the least
// live bytes, where the blocks placed before the plan overlap its first planned blocks the
// least. Sets every block's from_start from there; returns that phase and the step's peak.
struct step_start {
  std::size_t start_phase = 0;
  std::size_t peak_bytes = 0;
};
step_start set_step_start(std::vector<step_block>& blocks, std::size_t phases);

// Note [Layout refinement]: `blocks` laid out in `sequence` span `span_bytes`; lays them
// out again with the blocks that end above the step's peak moved to the front of the
// sequence, a few times (fewer for larger steps, and a small step stops after a few that
// narrow nothing), keeping in `blocks` the narrowest layout seen. Returns its span (0
// when cancelled).
std::size_t refine_layout(std::vector<step_block>& blocks, std::vector<std::size_t> sequence, std::size_t span_bytes,
                          const std::atomic<bool>* cancel);

// The step of `phases` phases run backwards (Note [Time reversal] in step_layout.cpp): the
// same blocks, in the same positions, each living over the mirror of its lifetime, so that
// the same pairs meet; `from_start` counts from the same cut, walked backwards.
std::vector<step_block> time_reversed(const std::vector<step_block>& blocks, std::size_t phases);

// One direction of lay_out_narrowest (Note [Time reversal]), whole: every order of
// kLayoutOrders (with `threads`, each after the first on a thread of its own), the
// narrowest refined, searched on and tried as a ring; no repair, no stream affinity. The
// caller's `blocks` and `peak_bytes` are the step's (or the step run backwards, which has
// the same peak). Returns the span (0 when cancelled). Throws only std::bad_alloc.
std::size_t lay_out_one_direction(std::vector<step_block>& blocks, std::size_t phases, std::size_t peak_bytes,
                                  const std::atomic<bool>* cancel, bool threads);

// How a layout uses threads of its own: none (the caller's alone); one for the backward
// direction beside the forward one (Note [Directions at once]: for a caller that waits for
// the layout, not one that goes on); one per order (Note [Layout threads]); or both.
enum class layout_threads { none, backward, orders, orders_and_backward };
// A step of `blocks` blocks that the allocating thread lays out and waits for: both
// directions at once, and each order on a thread of its own from kLayoutThreadBlocks
// blocks; no thread at all where threads are not allowed (loop_plan_threads:false).
constexpr layout_threads waited_layout_threads(bool threads_allowed, std::size_t blocks) noexcept {
  if (!threads_allowed) return layout_threads::none;
  return blocks >= kLayoutThreadBlocks ? layout_threads::orders_and_backward : layout_threads::backward;
}

// Lays the blocks of a step of `phases` phases out in every order of kLayoutOrders -- with
// orders or orders_and_backward, each order after the first on a thread of its own (here,
// one after the other, where no thread can be had) -- keeps the narrowest layout, refines
// it (refine_layout), searches on from it (skyline_layout) and tries a ring
// (ring_layout); where that stays above the step's peak, does it all again on the step run
// backwards (time_reversed; with backward or orders_and_backward, on a thread of its own
// beside the forward search, Note [Directions at once] in backward_direction.cpp) and keeps
// the narrower, in `blocks`, repairing it where it is still above the peak (repair_layout;
// with that thread and no `cancel`, each direction's repair as soon as that direction may
// be kept, Note [Repairs at once]); then, within
// that span, moves blocks towards places of their own stream (settle_stream_affinity,
// Note [Stream affinity]). The same layout whatever `threading`. Returns the span (0 when
// cancelled). Throws only std::bad_alloc.
std::size_t lay_out_narrowest(std::vector<step_block>& blocks, std::size_t phases, const std::atomic<bool>* cancel,
                              layout_threads threading);

}  // namespace fragless::core
