// The backward direction of a step's layout (Note [Time reversal] in step_layout.cpp): the
// step run backwards laid out whole, on a thread of its own beside the forward search
// where the caller waits (Note [Directions at once]), and the narrower of the two
// directions kept and repaired -- where the caller waits, each direction's repair started
// as soon as that direction is known to be kept or may be (Note [Repairs at once]).
// Invariant: whatever the threads' timing, the layout kept is the one laid out one
// direction after the other on one thread and then repaired: the same offsets, the same
// span.
// Plain C++, no device calls; the thread it starts is joined before it goes.
#pragma once

#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

#include "core/step_layout.hpp"

namespace fragless::core {

class backward_direction {
 public:
  // `forward`: the step's blocks, as the forward greedy stage left them; `peak_bytes`: the
  // step's peak.
  backward_direction(const std::vector<step_block>& forward, std::size_t phases, std::size_t peak_bytes, bool threads);
  backward_direction(const backward_direction&) = delete;
  backward_direction& operator=(const backward_direction&) = delete;
  ~backward_direction() { stop(); }

  // Starts laying the step out backwards on a thread of its own; false where no thread can
  // be had (keep_narrower_repaired then does it all). With no `cancel` (a caller that
  // waits, and that nothing cancels), the thread also repairs its layout where that layout
  // is kept or may be (Note [Repairs at once]).
  bool start(const std::atomic<bool>* cancel) noexcept;
  // Cancels the thread's work, if any, and joins it. Never throws.
  void stop() noexcept;

  // The forward direction ended above the step's peak at `forward_span_bytes`, its layout
  // in `blocks`: keeps the narrower of the two directions in `blocks` (the forward one on
  // equal spans) and, where it is still above the peak, repairs it (repair_layout).
  // Returns the span, 0 when `cancel` was set. Throws only std::bad_alloc.
  std::size_t keep_narrower_repaired(std::vector<step_block>& blocks, std::size_t forward_span_bytes,
                                     const std::atomic<bool>* cancel);

 private:
  // The backward layout's span (blocks_), 0 when `cancel` was set: the thread's, once it is
  // done, or laid out here where it could not finish.
  std::size_t lay_out(const std::atomic<bool>* cancel);
  void repair_on_thread(std::size_t span_bytes);
  std::size_t repair_forward_on_caller(std::vector<step_block>& blocks, std::size_t forward_span_bytes);
  static void copy_offsets(const std::vector<step_block>& from, std::vector<step_block>& to) noexcept;

  std::vector<step_block> blocks_;  // the step run backwards (time_reversed)
  std::size_t phases_, peak_bytes_;
  bool threads_;                         // its orders each on a thread of their own (Note [Layout threads])
  bool repairs_at_once_ = false;         // Note [Repairs at once]
  std::vector<step_block> forward_;      // the step as given (its lifetimes, for the thread's repair)
  std::vector<step_block> repaired_;     // forward_ at the backward layout, repaired by the thread
  std::size_t span_bytes_ = 0;           // written by the thread, read after the join; 0 until laid out
  std::size_t repaired_span_bytes_ = 0;  // the same; 0 where the thread repaired nothing
  std::atomic<std::size_t> published_backward_span_bytes_{0};  // Note [Repairs at once]; 0: not yet
  std::atomic<std::size_t> published_forward_span_bytes_{0};   // the same, the caller's
  std::atomic<bool> cancelled_{false};                // the thread's work, all of it
  std::atomic<bool> forward_repair_cancelled_{false};  // set by the thread where its layout is kept
  std::atomic<bool> finished_{false};
  std::thread worker_;
};

}  // namespace fragless::core
