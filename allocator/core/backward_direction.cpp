// The backward direction of a step's layout on a thread of its own, and the repair of the
// direction kept (Note [Directions at once], Note [Repairs at once]).
// Invariant: as backward_direction.hpp: the offsets kept are the one-thread layout's,
// whatever the timing; the thread is joined before the object goes.
#include "core/backward_direction.hpp"

#include "core/layout_repair.hpp"

#include <chrono>

namespace fragless::core {

// Note [Directions at once]
// The step run backwards is laid out only where the forward layout ends above the step's
// peak (Note [Time reversal]), and neither direction reads the other's offsets: only their
// spans are compared at the end. So once the forward greedy stage ends above the peak,
// the backward direction can be laid out on a thread of its own while the forward one is
// refined and searched on (the greedy stage is about a tenth of a large step's layout; a
// step that reaches its peak there starts none). If the forward direction then reaches
// the peak, the backward one is cancelled: its work is lost, the layout the same. Either
// way the layout taken is the one laid out one direction after the other, whatever the
// threads' timing. This is done only where the program waits for the layout: on the
// allocating thread, which lays out at once every step below kLayoutThreadBlocks blocks
// and every whole-pass step (Note [Layout threads] in loop_plan_layout.cpp), and then
// waits for the slower direction instead of both. A small step has its orders on the
// allocating thread (starting four threads would cost more than most such layouts), but
// one that needs both directions is no longer cheap: a 223-block step of corpus
// speculative-decoding seed 1, refused as too wide, took 155 ms there one direction after
// the other. A layout on a thread while the loop goes on keeps one thread after its
// greedy stage: there the extra thread, and the lost work, would come out of the
// program's cores (on the 2-core machine, with both directions at once there too, the
// replays below measured about 5 % more host ns/op: 673, 695 -> 716, 718). Measured on
// the 2-core machine (the library before and after, alternated runs):
// `fragless-bench layout --seeds 30 --jobs 1 --layout-threads` (every family's passes as
// whole-pass steps, every step's offsets the same) wall time 0.81x on
// `speculative-decoding` (median step 132 -> 98 ms), 0.86x `kv-cache-eviction`, 0.94x
// `many-streams`, all 0.92x; replays of seeds 1-60 of every family (`corpus --repetitions
// 5 --jobs 1 --allocators fragless`, two runs of each): the same peak and calls by pass on
// every seed, `speculative-decoding`'s longest call, median over its seeds, 196 -> 151
// ms (worst 789 -> 567), host ns/op within the runs' noise (752, 721 -> 751, 740). On a
// machine with a core free for each thread the wait is the slower direction's, where two
// cores share up to five threads here.

// Note [Repairs at once]
// Where both directions end above the step's peak, the narrower is repaired (Note [Layout
// repair]) -- the one stage after them that still ran one thing at a time while the program
// waits: 110-145 ms of the 0.27-0.8 s that `speculative-decoding` steps of 1,300-2,900
// blocks took in all (seeds 1-7, a timing not committed), and it began only once the slower
// direction was done, the faster one's thread idle meanwhile. Each repair reads only its
// own direction's layout and the step's lifetimes, so it can start as soon as its direction
// is known to be kept or may yet be: the forward one where the backward layout is not done
// or is no narrower, the backward one where the forward is not done or is wider. Each side
// publishes its span (sequentially consistent stores, then loads of the other's: of two
// sides finishing at once, at least one sees the other's) and then:
//  - the caller, its forward span published: if the backward span is known and narrower,
//    repairs nothing; if it is known and no narrower, stops the thread's repair (lost work)
//    and repairs the forward layout; if it is not known yet, repairs the forward layout
//    with a flag the thread sets should its own layout turn out narrower;
//  - the thread, its backward span published: if the forward span is known and no wider,
//    repairs nothing; if it is known and wider, sets that flag (the forward repair is lost
//    work) and repairs its own layout; if it is not known yet, repairs its own layout,
//    which the caller stops should the forward layout be kept.
// Then the caller joins the thread and keeps, by the rule of one direction after the other
// (the forward layout on equal spans), that direction's repaired layout -- repaired here
// where its repair was not done (the thread out of memory). A repair stopped is only ever
// the one not kept, and a repair done is the one-thread repair of the same offsets, so the
// layout is the same whatever the timing; the one-thread order of work is kept where the
// caller may cancel (a layout on a thread while the loop goes on has no backward thread
// anyway, Note [Directions at once]), since a repair watches one flag. The wait becomes the
// slower of (each direction and its repair) instead of the slower direction and then the
// repair; the work lost is a repair begun by the direction that finishes first and is not
// kept (300 ms of the 4.75 s of repairs over seeds 1-30 of `two-loops`,
// `kv-cache-eviction`, `many-streams` and `speculative-decoding`, a timing not committed).
// Measured on the 2-core machine (the library before and after, alternated runs):
// `fragless-bench layout --seeds 30 --jobs 1 --layout-threads`, every step's offsets the
// same, wall time `speculative-decoding` 4.85 -> 4.53 s (0.93x, five runs each; median step
// 125 -> 116 ms, worst 584 -> 491), the other families within the machine's noise
// (0.96-1.11x; the same two binaries 0.96-1.02x on three of them in a rerun); replays of
// seeds 1-60 of every family (`corpus --repetitions 5 --jobs 1 --allocators fragless`, two
// runs each): the same peak and calls by pass on every seed, `speculative-decoding`'s
// longest call, median over its seeds, 175 -> 161 ms (worst 591 -> 516). On two cores the
// other direction's thread and the layout threads of other steps share the core a repair
// would have to itself.

backward_direction::backward_direction(const std::vector<step_block>& forward, std::size_t phases,
                                       std::size_t peak_bytes, bool threads)
    : blocks_(time_reversed(forward, phases)), phases_(phases), peak_bytes_(peak_bytes), threads_(threads),
      forward_(forward) {}

bool backward_direction::start(const std::atomic<bool>* cancel) noexcept {
  try {
    repairs_at_once_ = cancel == nullptr;  // Note [Repairs at once]: a caller nothing cancels
    worker_ = std::thread([this] {
      try {
        const std::size_t span = lay_out_one_direction(blocks_, phases_, peak_bytes_, &cancelled_, threads_);
        span_bytes_ = span;
        if (span != 0 && repairs_at_once_) repair_on_thread(span);
      } catch (...) {
        // no host memory there: what is missing is done again by the caller, after the join
      }
      finished_.store(true, std::memory_order_release);
    });
    return true;
  } catch (...) {
    return false;  // no thread: keep_narrower_repaired sees none joinable and repairs nothing at once
  }
}

void backward_direction::stop() noexcept {
  cancelled_.store(true, std::memory_order_relaxed);
  if (worker_.joinable()) worker_.join();
}

// Note [Repairs at once]: the thread's side, its layout of `span_bytes` done.
void backward_direction::repair_on_thread(std::size_t span_bytes) {
  published_backward_span_bytes_.store(span_bytes, std::memory_order_seq_cst);
  const std::size_t forward_span = published_forward_span_bytes_.load(std::memory_order_seq_cst);
  if (forward_span != 0 && span_bytes >= forward_span) return;  // the forward layout is kept
  if (forward_span != 0) forward_repair_cancelled_.store(true, std::memory_order_relaxed);  // this one is
  if (span_bytes <= peak_bytes_) return;
  repaired_ = forward_;
  copy_offsets(blocks_, repaired_);
  repaired_span_bytes_ = repair_layout(repaired_, span_bytes, peak_bytes_, &cancelled_);  // 0 where stopped
}

// Note [Repairs at once]: the caller's side, the forward layout of `forward_span_bytes`
// done in `blocks`. Returns the repaired span, or 0 where nothing was repaired here (the
// backward layout known narrower, or this repair stopped because it is).
std::size_t backward_direction::repair_forward_on_caller(std::vector<step_block>& blocks,
                                                         std::size_t forward_span_bytes) {
  published_forward_span_bytes_.store(forward_span_bytes, std::memory_order_seq_cst);
  const std::size_t backward_span = published_backward_span_bytes_.load(std::memory_order_seq_cst);
  if (backward_span != 0 && backward_span < forward_span_bytes) return 0;  // the backward layout is kept
  if (backward_span != 0) cancelled_.store(true, std::memory_order_relaxed);  // its repair, if any, is lost
  return repair_layout(blocks, forward_span_bytes, peak_bytes_, backward_span != 0 ? nullptr : &forward_repair_cancelled_);
}

std::size_t backward_direction::lay_out(const std::atomic<bool>* cancel) {
  if (worker_.joinable()) {
    while (cancel != nullptr && !finished_.load(std::memory_order_acquire)) {
      if (cancel->load(std::memory_order_relaxed)) cancelled_.store(true, std::memory_order_relaxed);
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    worker_.join();
    if (span_bytes_ != 0) return span_bytes_;  // 0: cancelled, or no host memory there
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) return 0;
  }
  return lay_out_one_direction(blocks_, phases_, peak_bytes_, cancel, threads_);
}

std::size_t backward_direction::keep_narrower_repaired(std::vector<step_block>& blocks, std::size_t forward_span_bytes,
                                                       const std::atomic<bool>* cancel) {
  // Note [Repairs at once]: the forward repair at once, where the thread repairs too.
  const bool at_once = repairs_at_once_ && worker_.joinable();
  const std::size_t forward_repaired = at_once ? repair_forward_on_caller(blocks, forward_span_bytes) : 0;
  const std::size_t backward_span = lay_out(cancel);
  if (backward_span == 0) return 0;  // cancelled
  if (backward_span < forward_span_bytes) {  // the backward layout is kept (Note [Time reversal])
    if (repaired_span_bytes_ != 0) {       // and was repaired on the thread
      copy_offsets(repaired_, blocks);
      return repaired_span_bytes_;
    }
    copy_offsets(blocks_, blocks);
    if (backward_span <= peak_bytes_) return backward_span;
    return repair_layout(blocks, backward_span, peak_bytes_, cancel);
  }
  if (forward_repaired != 0) return forward_repaired;
  return repair_layout(blocks, forward_span_bytes, peak_bytes_, cancel);
}

void backward_direction::copy_offsets(const std::vector<step_block>& from, std::vector<step_block>& to) noexcept {
  for (std::size_t index = 0; index < to.size(); ++index) to[index].offset_bytes = from[index].offset_bytes;
}

}  // namespace fragless::core
