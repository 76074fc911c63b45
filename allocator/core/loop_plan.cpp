// Loop plans: recording, step detection, following a plan and what its hand-over may
// cost; a found step is checked and laid out in core/loop_plan_layout.cpp, the layout
// itself is core/step_layout (Note [Loop plans]).
// Invariant: a plan is followed only while the events match it exactly -- the first
// mismatch abandons it -- and the log holds at most kMaxLogTokens tokens.
#include "core/loop_plan.hpp"

#include <algorithm>
#include <string>

#include "core/log.hpp"
#include "core/monotonic_clock.hpp"

namespace fragless::core {

// step_layout stores phases as 32-bit numbers.
static_assert(loop_plan::kMaxLogTokens <= UINT32_MAX);

namespace {

constexpr std::uint64_t kHashBase = 0x100000001b3ULL;

std::uint64_t token_hash(const loop_token& token) noexcept {
  std::uint64_t value = token.size_bytes * 0x9e3779b97f4a7c15ULL;
  value ^= (token.age + 0x632be59bd9b4e019ULL) * 0xbf58476d1ce4e5b9ULL;
  value ^= static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(token.stream)) * 0x94d049bb133111ebULL;
  return value ^ (value >> 29);
}

std::size_t saturating_add(std::size_t a, std::size_t b) noexcept { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }

std::uint64_t window_power() noexcept {
  std::uint64_t power = 1;
  for (std::size_t index = 0; index < loop_plan::kWindowTokens; ++index) power *= kHashBase;
  return power;
}

}  // namespace

// Note [Move budget]: the loop keeps to a step whose layout was too wide; its events are
// compared with the step (the tokens of log positions [step_begin, step_end)), nothing is
// placed, and the log goes on. Note [Refused layouts]: the layout is kept when the step was
// just laid out; a step found again is followed without it.
void loop_plan::follow_refused(std::size_t step_begin, std::size_t step_end, bool with_layout) noexcept {
  if (!with_layout) {
    try {
      load_step(step_begin, step_end);
    } catch (...) {
      plan_.clear();
      return;  // no host memory: the loop is not followed, and not budgeted
    }
  }
  active_ = true;
  refused_ = true;
  refused_events_followed_ = 0;
  refused_layout_ = with_layout;
  pending_ = false;
  placing_ = false;
  postponed_ = false;
  phase_ = 0;
  span_bytes_ = 0;
}

void loop_plan::load_step(std::size_t step_begin, std::size_t step_end) {
  plan_.assign(step_end - step_begin, planned_token{});
  for (std::size_t phase = 0; phase < plan_.size(); ++phase)
    plan_[phase] = {log_[step_begin + phase].token, -1, log_[step_begin + phase].own_mapping};
}

// Note [Refused layouts]
void loop_plan::take_refused_layout() noexcept {
  refused_ = false;
  span_bytes_ = refused_placed_span_bytes_;
  postponed_ = false;
  // The memory is there (the caller checked): the hand-over is not weighed against the
  // loop's churn.
  paid_churn_bytes_ = SIZE_MAX;
  paid_by_moves_ = true;
  pending_ = true;
  if (log_enabled(log_level::debug))
    log_message(log_level::debug, "loop plan: the refused step of " + std::to_string(plan_.size()) +
                                      " events is planned: reserved memory holds its layout, span " +
                                      std::to_string(span_bytes_) + " bytes");
}

void loop_plan::drop_plan() noexcept {
  active_ = false;
  log_through_plan_ = false;
  refused_ = false;
  pending_ = false;
  placing_ = false;
  plan_.clear();
  clear_log();
}

void loop_plan::set_enabled(bool enabled) noexcept {
  if (!enabled) {
    if (active_) abandon("turned off");
    clear_log();
  }
  enabled_ = enabled;
}

// Note [Loop plans]: hot for planned loops -- one comparison against the expected token.
std::optional<std::size_t> loop_plan::planned_offset(std::size_t size_bytes, stream_id stream) const noexcept {
  if (!placing_) return std::nullopt;
  const planned_token& expected = plan_[phase_];
  if (expected.offset_bytes < 0 || expected.token.size_bytes != size_bytes || expected.token.stream != stream)
    return std::nullopt;
  return static_cast<std::size_t>(expected.offset_bytes);
}

bool loop_plan::deviates(std::size_t size_bytes, stream_id stream) const noexcept {
  return placing_ && !(plan_[phase_].token == loop_token{size_bytes, 0, stream});
}

std::uint64_t loop_plan::record_allocation(std::size_t size_bytes, stream_id stream, const loop_churn& churn,
                                           bool own_mapping) noexcept {
  const std::uint64_t sequence = next_sequence_++;
  if (!enabled_) return sequence;
  latest_churn_ = churn;
  const loop_token token{size_bytes, 0, stream};
  if (active_) {
    follow(token);
    // Note [Layout threads]: recorded meanwhile; Note [Move budget]: and beside a refused
    // step; Note [Log through a plan's first step]: and until the plan placed a whole step.
    if (active_ && layout_ == nullptr && !refused_ && !log_through_plan_) return sequence;
  }
  if (recording(churn)) append(logged_token{token, sequence, churn, own_mapping});
  return sequence;
}

// Note [Loop plans]: recording starts at the first page move (or cross-stream wait, Note
// [Waits as churn]), and pauses after a whole log without one, so a pool that never moves
// pages nor waits pays nothing for it. After a whole log of waits without a plan, only a
// page move starts it again (and waits count again from there).
bool loop_plan::recording(const loop_churn& churn) noexcept {
  if (recording_) return true;
  if (churn.moved_bytes != churn_when_paused_.moved_bytes) {
    recording_ = true;
    waits_exhausted_ = false;
  } else if (!waits_exhausted_ && churn.waited_bytes != churn_when_paused_.waited_bytes) {
    recording_ = true;
  }
  return recording_;
}

void loop_plan::record_release(std::uint64_t sequence, const loop_churn& churn) noexcept {
  if (!enabled_) return;
  latest_churn_ = churn;
  const loop_token token{0, next_sequence_ - sequence, nullptr};
  if (active_) {
    follow(token);
    // As record_allocation.
    if (active_ && layout_ == nullptr && !refused_ && !log_through_plan_) return;
  }
  if (recording(churn)) append(logged_token{token, sequence, churn});
}

void loop_plan::follow(const loop_token& token) noexcept {
  if (!(plan_[phase_].token == token)) {
    abandon(token.size_bytes != 0 ? "another allocation" : "another free");
    return;
  }
  if (placing_ && plan_[phase_].offset_bytes >= 0) ++counters_.planned_allocations;
  if (refused_) ++refused_events_followed_;  // Note [Move budget]
  phase_ = phase_ + 1 == plan_.size() ? 0 : phase_ + 1;
  // Note [Log through a plan's first step]: placing began at start_phase_; back there, the
  // plan has placed a whole step, and holds.
  if (placing_ && log_through_plan_ && phase_ == start_phase_) {
    log_through_plan_ = false;
    clear_log();
  }
  if (placing_ || refused_ || phase_ != start_phase_) return;
  if (layout_ != nullptr && !finish_layout()) return;  // Note [Layout threads]
  if (postponed_) {
    postponed_ = false;
    if (latest_churn_ == churn_when_postponed_) {
      // The step moved nothing: the loop settled by itself. Not a failure.
      active_ = false;
      log_through_plan_ = false;
      plan_.clear();
      clear_log();
      return;
    }
    // Note [Loop plans]: what the loop churned without the plan counts toward its hand-over.
    last_step_churn_bytes_ = static_cast<std::size_t>(latest_churn_.total_bytes() - churn_when_postponed_.total_bytes());
    paid_churn_bytes_ = saturating_add(paid_churn_bytes_, last_step_churn_bytes_);
    paid_by_moves_ = paid_by_moves_ || latest_churn_.moved_bytes != churn_when_postponed_.moved_bytes;
  }
  pending_ = true;
}

std::size_t loop_plan::hand_over_allowance_bytes() const noexcept {
  if (paid_churn_bytes_ == SIZE_MAX) return SIZE_MAX;
  const std::size_t ahead_bytes = last_step_churn_bytes_ > SIZE_MAX / kHandOverPaybackSteps
                                      ? SIZE_MAX
                                      : last_step_churn_bytes_ * kHandOverPaybackSteps;
  return saturating_add(paid_churn_bytes_, ahead_bytes);
}

void loop_plan::postpone() noexcept {
  pending_ = false;
  postponed_ = true;
  // Note [Page moves]: the growth allowance is for a loop that moves pages while its plan
  // waits; one that only waits (Note [Waits as churn]) moves none.
  if (paid_by_moves_) hand_over_waited_ = true;
  churn_when_postponed_ = latest_churn_;
}

void loop_plan::activate() noexcept {
  pending_ = false;
  placing_ = true;
  ++counters_.plans_built;
}

void loop_plan::reject() noexcept {
  cancel_layout();
  ++counters_.plans_rejected;
  planning_failed_ = true;
  active_ = false;
  log_through_plan_ = false;
  refused_ = false;
  pending_ = false;
  plan_.clear();
  clear_log();
}

void loop_plan::abandon(const char* reason) noexcept {
  cancel_layout();  // Note [Layout threads]
  // Note [Move budget]: leaving a refused step ends its loop's budget; the log, which went
  // on beside it, goes on, and the step may be found and followed again.
  const bool refused = refused_;
  if (active_) {
    if (placing_) ++counters_.plans_abandoned;
    // Not a failure of planning (Note [Move budget]): the loop it planned has ended.
    if (!refused) min_step_tokens_ = std::max(min_step_tokens_, plan_.size() + 1);
    if (log_enabled(log_level::debug))
      log_message(log_level::debug, std::string(refused ? "loop plan: left the refused step at event "
                                                         : "loop plan abandoned at step event ") +
                                        std::to_string(phase_) + " of " + std::to_string(plan_.size()) + ": " + reason);
  }
  active_ = false;
  refused_ = false;
  pending_ = false;
  placing_ = false;
  plan_.clear();
  // Note [Log through a plan's first step]: a plan left before it placed a whole step
  // keeps the log, which went on through it.
  if (!refused && !log_through_plan_) clear_log();
  log_through_plan_ = false;
}

void loop_plan::clear_log() noexcept {
  log_.clear();
  allocation_positions_.clear();
  window_ends_.clear();
  window_hash_ = 0;
  first_logged_sequence_ = next_sequence_;
  next_build_position_ = 0;
  waiting_step_tokens_ = 0;
  built_tokens_ = 0;
}

// Note [Log storage]
// The log is bounded (kMaxLogTokens), and it is read while it grows: a doubling vector
// copied the whole log at each doubling and touched pages twice over, the kernel zeroing
// each -- on the corpus, in the pass where most plans hand over, most of the allocator's
// page faults there and nearly a tenth of its time (`perf` over `fragless-bench replay`
// of seeds 1-8 of every family, three repetitions against two). So recording reserves
// the whole bound at once: address space only, its pages made as the log first reaches
// them, and none copied. Kept, as the log's capacity always was, for the next recording.
void loop_plan::append(const logged_token& entry) noexcept {
  try {
    if (log_.size() >= kMaxLogTokens && active_ && !refused_ && log_through_plan_) {
      // Note [Log through a plan's first step]: a plan waits to hand over; not a log
      // without a plan.
      log_through_plan_ = false;
      clear_log();
      return;
    }
    if (log_.size() >= kMaxLogTokens) {
      // A whole log without a plan: any step may be planned again, and planning has
      // failed (Note [Move budget]) -- unless the log churned by waits alone (Note [Waits
      // as churn]). If no page moved meanwhile, recording pauses until one does (or a
      // wait, unless the log's waits found no plan).
      const bool moved = log_.front().churn.moved_bytes != entry.churn.moved_bytes;
      const bool waited = log_.front().churn.waited_bytes != entry.churn.waited_bytes;
      if (moved || !waited) planning_failed_ = true;
      if (!moved) {
        if (waited) waits_exhausted_ = true;
        recording_ = false;
        churn_when_paused_ = entry.churn;
      }
      clear_log();
      min_step_tokens_ = kMinStepTokens;
      if (!recording_) return;
    }
    if (log_.empty()) {
      first_logged_sequence_ = entry.token.size_bytes != 0 ? entry.sequence : next_sequence_;
      if (log_.capacity() < kMaxLogTokens) {  // Note [Log storage]
        log_.reserve(kMaxLogTokens);
        allocation_positions_.reserve(kMaxLogTokens);
      }
    }
    if (entry.token.size_bytes != 0) {
      if (entry.sequence != first_logged_sequence_ + allocation_positions_.size()) {
        clear_log();  // an allocation recorded out of turn: start again from it
        first_logged_sequence_ = entry.sequence;
      }
      allocation_positions_.push_back(log_.size());
    }
    log_.push_back(entry);
    static const std::uint64_t power = window_power();
    window_hash_ = window_hash_ * kHashBase + token_hash(entry.token);
    if (log_.size() > kWindowTokens) window_hash_ -= token_hash(log_[log_.size() - 1 - kWindowTokens].token) * power;
    if (log_.size() >= kWindowTokens) look_for_step();
  } catch (...) {
    clear_log();  // no host memory: recording starts again later
  }
}

void loop_plan::look_for_step() {
  const std::size_t newest = log_.size() - 1;
  const std::optional<std::size_t> seen = window_ends_.exchange(window_hash_, newest);
  if (!seen) return;
  if (active_ && !refused_ && layout_ == nullptr) return;  // Note [Log through a plan's first step]
  const std::size_t previous = *seen;
  const std::size_t step_tokens = newest - previous;
  if (step_tokens < min_step_tokens_) return;
  // Note [Loop plans] (Building): one candidate of a length per step. Where the last one
  // built was rejected for its shape, only its own length waits; another is tried at
  // once, within the build budget.
  const bool early = newest < next_build_position_;
  if (early && (waiting_step_tokens_ == 0 || waiting_step_tokens_ == step_tokens)) return;
  // Note [Repeated steps]: past that budget, a step that repeats the one before it is
  // still built, within twice the budget.
  if (early && built_tokens_ + step_tokens > 2 * log_.size() &&
      (built_tokens_ + step_tokens > 4 * log_.size() || !repeats_step_before(newest, step_tokens)))
    return;
  for (std::size_t back = 0; back < kWindowTokens; ++back)
    if (!(log_[newest - back].token == log_[previous - back].token)) return;  // a hash collision
  // The step is (previous, newest]; frees in it may reach one step further back.
  next_build_position_ = newest + step_tokens;
  waiting_step_tokens_ = 0;
  // Note [Loop plans]: only a step that moved pages (or waited, Note [Waits as churn]) is
  // planned; whether the loop keeps doing so is weighed when the plan starts (postpone()).
  if (log_[newest].churn == log_[previous].churn) return;
  const std::pair<std::uint64_t, std::size_t> step{window_hash_, step_tokens};
  if (std::find(rejected_steps_.begin(), rejected_steps_.end(), step) != rejected_steps_.end()) {
    if (!active_) follow_refused(previous + 1, newest + 1, false);  // Note [Move budget]
    return;
  }
  built_tokens_ += step_tokens;
  const std::int64_t build_start_ns = now_ns();
  const auto step_churn_bytes = static_cast<std::size_t>(log_[newest].churn.total_bytes() - log_[previous].churn.total_bytes());
  const auto step_moved_bytes = static_cast<std::size_t>(log_[newest].churn.moved_bytes - log_[previous].churn.moved_bytes);
  // The layout's width is weighed against the pages moved alone: what the move budget
  // would create instead (build_plan).
  const char* rejected = build_plan(previous + 1, newest + 1, step_moved_bytes, step);
  const std::int64_t build_ns = now_ns() - build_start_ns;
  if (rejected == nullptr) {
    log_through_plan_ = true;  // Note [Log through a plan's first step]
    active_ = true;
    refused_ = false;
    phase_ = 0;
    pending_ = start_phase_ == 0;
    postponed_ = false;
    paid_churn_bytes_ = last_step_churn_bytes_ = step_churn_bytes;
    paid_by_moves_ = step_moved_bytes != 0;
  } else {
    ++counters_.plans_rejected;
    // Note [Loop plans]: tried again as soon as a step no longer reaches the blocks made
    // before recording began.
    if (rejected == kFreesUnrecordedBlock)
      next_build_position_ = last_free_of_unrecorded_block(previous + 1, newest + 1) + step_tokens;
    else if (rejected != kLayoutTooWide)
      waiting_step_tokens_ = step_tokens;  // its shape: another length may be the step
    // Only the layout is costly to redo; the other checks may pass one step later, with
    // more of the loop recorded.
    if (rejected == kLayoutTooWide) {
      remember_rejection(step);
      follow_refused(previous + 1, newest + 1, true);  // Note [Move budget], Note [Refused layouts]
    }
  }
  if (log_enabled(log_level::debug))
    log_message(log_level::debug, "loop plan: step of " + std::to_string(step_tokens) + " events at event " +
                                      std::to_string(newest) + ": " +
                                      (rejected != nullptr  ? std::string("not planned (") + rejected + ")"
                                       : layout_ != nullptr ? std::string("laying out on a thread")
                                                            : "planned, span " + std::to_string(span_bytes_) + " bytes") +
                                      ", " + std::to_string(build_ns / 1000) + " us");
}

// Note [Log through a plan's first step]
// Recording stopped when a plan was built and the log was cleared when it was abandoned,
// so a plan left early -- a repeat inside the step taken for the step, planned and
// abandoned where the repeat ends -- threw away the log, and the true step could be found
// only once a whole step had been recorded again: corpus model-swap seed 139 planned and
// abandoned four such repeats (each within its first step), and its 17,432-event step
// handed over in the fifth pass, 1,230 calls in each of passes 2-4. Now recording goes on
// from a plan's build until the plan has placed a whole step (no step is built meanwhile:
// the plan is the candidate); a plan abandoned before then keeps the log, and only a longer
// step is planned next, found as soon as its windows recur. Once a whole step is placed the
// log is cleared and recording stops, as before, so a loop its plan holds pays nothing for
// it; a plan waiting to hand over that fills the log clears it without marking planning as
// failed. Corpus, 14,000 seeds, five repetitions, fragless alone: seeds calling in their
// fifth pass where PyTorch does not 233 -> 40 (model-swap 176 -> 5), calls over the five
// passes -2.3 %, peaks more than 1 % lower on 23 seeds and higher on 8.

// Note [Repeated steps]
// The build budget (Note [Loop plans], Building) lets an early candidate through only
// while all builds since the log began examined at most two tokens per token logged.
// A step that holds two shorter repeats of its own -- a model server loading the same
// model twice in a step, at a distance that changes with what came between -- finds a
// candidate at each of them: each is built and rejected (not periodic), each makes the
// next candidate wait a step of its length, and together they spend the budget as fast
// as the log grows. The true step, whose windows recur one step back at every event,
// then came early and over budget at every event, for good: corpus model-swap seed 557
// built four such candidates in every pass and moved 898 chunks in each (1,796 calls),
// with its 25,074-event step found at every event from the second pass on and never
// built. So a candidate whose step repeats the one before it -- the tokens at
// kRepeatSamples positions spread over the step equal those one step earlier, of which at
// least kRepeatSamplesNeeded must have their twin recorded (a quarter of the step before:
// the log restarts where a plan is abandoned, and waiting for a whole step before it
// planned model-swap seed 139's 17,432-event step in the fifth pass) -- is built past the budget, within twice it
// (four tokens examined per token logged, plus the samples, at most kRepeatSamples
// comparisons per recorded event): the shorter repeats cannot be such a step, since what
// lies between them differs. A step that repeats exactly is the one a plan can follow.
// Corpus, 14,000 seeds, five repetitions: seeds calling in their fifth pass where PyTorch
// does not 299 -> 233 (model-swap 231 -> 176), no peak of the eleven families written
// before model-swap moved by 1 % (docs/compaction.md, "Loops laid out once").
bool loop_plan::repeats_step_before(std::size_t newest, std::size_t step_tokens) const noexcept {
  // Positions whose twin one step back is recorded: the step's last newest + 1 - step_tokens.
  const std::size_t comparable = std::min(step_tokens, newest + 1 - step_tokens);
  if (comparable * kRepeatSamples < step_tokens * kRepeatSamplesNeeded) return false;
  const std::size_t stride = std::max<std::size_t>(1, step_tokens / kRepeatSamples);
  for (std::size_t back = 0; back < comparable; back += stride)
    if (!(log_[newest - back].token == log_[newest - back - step_tokens].token)) return false;
  return true;
}

std::size_t loop_plan::last_free_of_unrecorded_block(std::size_t step_begin, std::size_t step_end) const noexcept {
  for (std::size_t position = step_end; position-- > step_begin;)
    if (log_[position].token.size_bytes == 0 && log_[position].sequence < first_logged_sequence_) return position;
  return step_begin;
}

}  // namespace fragless::core
