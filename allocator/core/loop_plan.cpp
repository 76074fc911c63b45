// Loop plans: recording, step detection, following; the layout is core/step_layout
// (Note [Loop plans]).
#include "core/loop_plan.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>

#include "core/log.hpp"
#include "core/monotonic_clock.hpp"
#include "core/step_layout.hpp"

namespace fragless::core {

// step_layout stores phases as 32-bit numbers.
static_assert(loop_plan::kMaxLogTokens <= UINT32_MAX);

namespace {

constexpr std::uint64_t kHashBase = 0x100000001b3ULL;
constexpr const char* kLayoutTooWide = "layout too wide";
constexpr const char* kFreesUnrecordedBlock = "frees a block made before recording began";

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

// Note [Layout threads]
// Laying out a step is blocks^2 work per order (four orders, Note [Layout orders]: 415 ms
// for pangu_2.6B's 13,000-block step on a 2-core machine, two seconds and more at
// kMaxPlannedBlocks), and it used to run on the thread that allocates, under the device
// lock: a training loop stalled for that long at the step where its plan was found (on an
// H200, one GPT-2 step of 200 ms among steps of 30, with two orders). A step of
// kLayoutThreadBlocks blocks or more is therefore laid out on threads of its own (one per
// order), from a copy of the step, while the loop goes on: the plan compares the events with the step meanwhile, as it does any plan, and takes the
// layout where it would start placing (the step's least-live event, usually about half a
// step later) -- waiting for it there if it is not done. So the plan starts at the same
// event with the same layout as when it was laid out at once, whatever the threads'
// timing. Only a layout too wide is found out later, at that event instead of where the
// step was found: the events in between are recorded as well as compared, so the log goes
// on as it would have, but the move budget (Note [Move budget]) counts planning as failed
// from that event on, not from the step's discovery (1,000 corpus seeds of every family,
// five repetitions: 42 of 8,000 workloads settle at another peak, 18 lower and 24 higher;
// every family's geometric mean within 0.05 %). A deviation before then stops the layout. A
// smaller step is laid out at once (about 0.5 ms for 300 blocks, kv-cache-eviction seeds
// 11 and 21), where starting the threads (about 50 us each) would hardly pay. The bound
// was 1,024 blocks with two orders; four take 3-5 ms for 1,000 blocks on the allocating
// thread, so it is 256 now. In a child forked while a layout was under way the thread does not
// exist: the child neither waits for it nor uses its result. loop_plan_threads:false lays
// out every step on the allocating thread.
struct loop_plan::layout_job {
  std::vector<step_block> blocks;
  std::size_t phases = 0;  // the step's events
  std::size_t peak_bytes = 0;
  std::size_t churn_bytes = 0;
  std::pair<std::uint64_t, std::size_t> step{};  // (window hash, length), for rejected_steps_
  std::int64_t started_ns = 0;
  std::size_t span_bytes = 0;  // written by the thread, read after the join
  bool done = false;           // likewise: false when it ran out of host memory
  std::atomic<bool> cancelled{false};
  std::thread thread;
  pid_t pid = 0;

  // Waits for the thread, if any; in a forked child only forgets it.
  void join() noexcept {
    if (!thread.joinable()) return;
    try {
      if (pid == ::getpid()) {
        thread.join();
        return;
      }
      done = false;
    } catch (...) {
      done = false;
    }
    try {
      thread.detach();
    } catch (...) {
    }
  }
};

loop_plan::loop_plan(double headroom_fraction, double churn_headroom_fraction, bool layout_threads,
                     bool stream_affinity) noexcept
    : headroom_(headroom_fraction < 0 ? 0 : headroom_fraction),
      churn_headroom_(churn_headroom_fraction < 0 ? 0 : churn_headroom_fraction),
      layout_threads_(layout_threads),
      stream_affinity_(stream_affinity) {}

loop_plan::~loop_plan() { cancel_layout(); }

void loop_plan::cancel_layout() noexcept {
  if (layout_ == nullptr) return;
  layout_->cancelled.store(true, std::memory_order_relaxed);
  layout_->join();
  layout_.reset();
}

bool loop_plan::finish_layout() noexcept {
  std::unique_ptr<layout_job> job = std::move(layout_);
  const std::int64_t wait_start_ns = now_ns();
  job->join();
  const char* rejected = job->done ? take_layout(*job) : "no host memory for the layout";
  if (log_enabled(log_level::debug))
    log_message(log_level::debug, "loop plan: step of " + std::to_string(plan_.size()) + " events laid out on a thread: " +
                                      (rejected == nullptr ? "planned, span " + std::to_string(span_bytes_) + " bytes"
                                                           : std::string("not planned (") + rejected + ")") +
                                      ", " + std::to_string((now_ns() - job->started_ns) / 1000) + " us, waited " +
                                      std::to_string((now_ns() - wait_start_ns) / 1000) + " us");
  if (rejected == nullptr) return true;
  if (rejected != kLayoutTooWide) {
    drop_plan();
    return false;
  }
  // As a layout too wide at once: the log, recorded meanwhile, goes on, and the loop is
  // followed without placing (Note [Move budget]).
  ++counters_.plans_rejected;
  remember_rejection(job->step);
  refused_ = true;
  refused_events_followed_ = 0;
  refused_layout_ = true;  // Note [Refused layouts]: take_layout kept its offsets
  pending_ = false;
  return false;
}

void loop_plan::remember_rejection(std::pair<std::uint64_t, std::size_t> step) noexcept {
  try {
    if (rejected_steps_.size() >= kRememberedRejections) rejected_steps_.erase(rejected_steps_.begin());
    rejected_steps_.push_back(step);
  } catch (...) {
    // only the memory of a rejection is lost: the step may be laid out again
  }
}

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
    // Note [Layout threads]: recorded meanwhile; Note [Move budget]: and beside a refused step.
    if (active_ && layout_ == nullptr && !refused_) return sequence;
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
    // Note [Layout threads]: recorded meanwhile; Note [Move budget]: and beside a refused step.
    if (active_ && layout_ == nullptr && !refused_) return;
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
  if (placing_ || refused_ || phase_ != start_phase_) return;
  if (layout_ != nullptr && !finish_layout()) return;  // Note [Layout threads]
  if (postponed_) {
    postponed_ = false;
    if (latest_churn_ == churn_when_postponed_) {
      // The step moved nothing: the loop settled by itself. Not a failure.
      active_ = false;
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
  if (!refused) clear_log();
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

void loop_plan::append(const logged_token& entry) noexcept {
  try {
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
    if (log_.empty()) first_logged_sequence_ = entry.token.size_bytes != 0 ? entry.sequence : next_sequence_;
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
  const std::size_t previous = *seen;
  const std::size_t step_tokens = newest - previous;
  if (step_tokens < min_step_tokens_) return;
  // Note [Loop plans] (Building): one candidate of a length per step. Where the last one
  // built was rejected for its shape, only its own length waits; another is tried at
  // once, within the build budget.
  const bool early = newest < next_build_position_;
  if (early && (waiting_step_tokens_ == 0 || waiting_step_tokens_ == step_tokens)) return;
  if (early && built_tokens_ + step_tokens > 2 * log_.size()) return;
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

std::size_t loop_plan::last_free_of_unrecorded_block(std::size_t step_begin, std::size_t step_end) const noexcept {
  for (std::size_t position = step_end; position-- > step_begin;)
    if (log_[position].token.size_bytes == 0 && log_[position].sequence < first_logged_sequence_) return position;
  return step_begin;
}

const char* loop_plan::build_plan(std::size_t step_begin, std::size_t step_end, std::size_t churn_bytes,
                                  std::pair<std::uint64_t, std::size_t> step) {
  const std::size_t step_tokens = step_end - step_begin;
  std::vector<std::int64_t> block_of_phase(step_tokens, -1);
  std::vector<step_block> blocks;
  std::vector<stream_id> step_streams;
  for (std::size_t phase = 0; phase < step_tokens; ++phase) {
    const loop_token& token = log_[step_begin + phase].token;
    if (token.size_bytes == 0) continue;
    if (blocks.size() >= kMaxPlannedBlocks) return "too many blocks";
    block_of_phase[phase] = static_cast<std::int64_t>(blocks.size());
    blocks.push_back(step_block{phase, token.size_bytes, phase, SIZE_MAX, 0});
    // Note [Stream affinity]: the step's streams, numbered in the order they first come
    // (all one when the stage is off: it leaves a one-stream step alone).
    if (!stream_affinity_) continue;
    const auto known = std::find(step_streams.begin(), step_streams.end(), token.stream);
    blocks.back().stream_index = static_cast<std::uint32_t>(known - step_streams.begin());
    if (known == step_streams.end()) step_streams.push_back(token.stream);
  }
  for (std::size_t phase = 0; phase < step_tokens; ++phase) {
    const logged_token& entry = log_[step_begin + phase];
    if (entry.token.size_bytes != 0) continue;
    if (entry.sequence < first_logged_sequence_) return kFreesUnrecordedBlock;
    const std::size_t made_at = allocation_positions_[entry.sequence - first_logged_sequence_];
    std::size_t made_phase = 0;
    bool wraps = false;
    if (made_at >= step_begin) {
      made_phase = made_at - step_begin;
    } else if (made_at + step_tokens >= step_begin) {
      // Made in the step before: its twin in this step is made at the same phase, and
      // freed here in the next step.
      made_phase = made_at + step_tokens - step_begin;
      if (!(log_[made_at].token == log_[step_begin + made_phase].token)) return "not periodic";
      if (phase >= made_phase) return "a block lives longer than a step";
      wraps = true;
    } else {
      return "a block lives longer than a step";
    }
    const std::int64_t block_index = block_of_phase[made_phase];
    if (block_index < 0) return "not periodic";
    step_block& block = blocks[static_cast<std::size_t>(block_index)];
    if (block.first_end != SIZE_MAX) return "not periodic";
    block.first_end = wraps ? step_tokens : phase;
    block.second_end = wraps ? phase : 0;
  }
  // Closed: every block made in the step is freed within one step.
  for (const step_block& block : blocks)
    if (block.first_end == SIZE_MAX) return "not closed";
  const std::vector<std::int64_t> live_change = step_live_changes(blocks, step_tokens);
  // Placing starts after the event that leaves the least live bytes: there the blocks
  // placed before the plan overlap its first planned blocks the least.
  std::int64_t live = 0, peak = 0, least = INT64_MAX;
  std::size_t start_phase = 0;
  for (std::size_t phase = 0; phase < step_tokens; ++phase) {
    live += live_change[phase];
    peak = std::max(peak, live);
    if (live < least) {
      least = live;
      start_phase = phase + 1 == step_tokens ? 0 : phase + 1;
    }
  }
  auto job = std::make_unique<layout_job>();
  job->blocks = std::move(blocks);
  job->phases = step_tokens;
  job->peak_bytes = static_cast<std::size_t>(peak);
  job->churn_bytes = churn_bytes;
  job->step = step;
  job->started_ns = now_ns();
  for (step_block& block : job->blocks) block.from_start = (block.first_begin + step_tokens - start_phase) % step_tokens;
  start_phase_ = start_phase;
  load_step(step_begin, step_end);
  span_bytes_ = 0;
  // Note [Layout threads]: a large step is laid out while the loop goes on, up to the event
  // where placing starts (when that is the next one, it is laid out here). The events are
  // recorded meanwhile, so a log cleared while a layout is under way may find a step again:
  // the new plan replaces the one not yet taken.
  cancel_layout();
  const bool on_threads = layout_threads_ && job->blocks.size() >= kLayoutThreadBlocks;
  if (on_threads && start_phase != 0) {
    job->pid = ::getpid();
    layout_job* const running = job.get();
    try {
      job->thread = std::thread([running] {
        try {
          running->span_bytes = lay_out_narrowest(running->blocks, running->phases, &running->cancelled, true);
          running->done = !running->cancelled.load(std::memory_order_relaxed);
        } catch (...) {
          // no host memory: done stays false, and the plan is dropped when it is taken
        }
      });
      layout_ = std::move(job);
      return nullptr;
    } catch (...) {
      // no thread to be had: laid out here
    }
  }
  job->span_bytes = lay_out_narrowest(job->blocks, job->phases, nullptr, on_threads);
  const char* rejected = take_layout(*job);
  if (rejected != nullptr && rejected != kLayoutTooWide) plan_.clear();  // Note [Refused layouts]
  return rejected;
}

// Note [Loop plans]: within the headroom, or wider than the step's peak by no more than
// the pages the step churned -- what the move budget would create for it instead.
const char* loop_plan::take_layout(const layout_job& job) noexcept {
  const std::size_t span = job.span_bytes;
  const auto peak = static_cast<double>(job.peak_bytes);
  const bool within_headroom = static_cast<double>(span) <= peak * (1.0 + headroom_);
  const bool paid_by_churn = static_cast<double>(span) <= peak * (1.0 + churn_headroom_) &&
                             span - std::min(span, job.peak_bytes) <= job.churn_bytes;
  for (const step_block& block : job.blocks) plan_[block.phase].offset_bytes = static_cast<std::int64_t>(block.offset_bytes);
  span_bytes_ = span;
  leave_out_mapped_blocks(job.blocks);
  if (!within_headroom && !paid_by_churn) {
    // Note [Refused layouts]: kept, placing nothing, until reserved memory holds it -- its
    // whole span, the places of blocks left in their mappings included (their idle
    // mappings count as free memory where they are weighed).
    refused_span_bytes_ = span;
    refused_placed_span_bytes_ = span_bytes_;
    span_bytes_ = 0;
    return kLayoutTooWide;
  }
  return nullptr;
}

// Note [Mapped blocks in a plan]
// A huge request is served by a mapping of its own when a cached one fits it exactly
// (Note [Growth]), and in a loop that repeats its sizes one does: the mapping is reused
// every step with no device call; so is a stitched one (Note [Stitching]). A plan that
// places such a block in its range makes the hand-over give the mapping back and create
// the same bytes again as pages of the range, at a cuMemCreate and a cuMemMap per chunk
// (1/256 of reserved memory or 1/32 of the run, Note [Physical chunks]): about a hundred
// of each per GiB in a loop of a few GiB. Where the layout puts another block in that
// block's place at some other time of the step, this is the price of the memory the plan
// saves. Where it puts none -- the block's addresses are its own all step, as a model's
// weights are when the program's loop is its whole run -- the plan saves nothing there,
// and its hand-over lacks the mapping's bytes: dearer than the step it was built from, it
// also waited a step before starting (Note [Loop plans]). Such a block, served from a
// mapping of its own in the step the plan was built from, is left out of the plan: its
// place is cut out of the layout (the blocks above it move down by its size; none
// overlaps it, so no two come to overlap) and its request stays a token of the step,
// expected in its turn but served as any request of its size is, by its cached mapping.
// Reserved memory is the same either way: the layout without it is as much narrower as
// the block is large. A block the step served from the shared range stays in the plan,
// whatever its size: its pages are the loop's, which the range is laid over. (Left out
// too, such a block -- a 4 GiB activation of corpus unet-resolution seed 374 -- was
// placed beside the range and created its pages there, 1.012x -> 1.032x the ideal.)
// Corpus unet-resolution seed 1, whose loop is the whole program with 4.6 GB of weights
// in two mappings: the plan waited a step (its hand-over lacked 4.6 GB where the step
// moved 2.2 GB), handed over in the fifth pass and made 408 device calls there (201
// cuMemCreate); with the weights left out it hands over a step earlier, and the fifth pass
// makes none. For the same reason a planned run that no cached chunk fits releases an idle
// chunk outside the range before the growth rule (Note [Growth]) would give back an idle
// mapping to make room for its pages: the mapping of a weight made a few events later.
// (Tried and not kept -- every huge block alone in its place left out, and the growth rule
// kept off the mappings the plan expects -- in docs/compaction.md.)
void loop_plan::leave_out_mapped_blocks(const std::vector<step_block>& blocks) noexcept {
  try {
    std::vector<std::pair<std::size_t, std::size_t>> cut;  // (offset, size) of each block left out
    for (const step_block& block : blocks) {
      if (!plan_[block.phase].own_mapping) continue;
      const std::size_t end = block.offset_bytes + block.size_bytes;
      bool alone = true;
      for (const step_block& other : blocks)
        if (&other != &block && other.offset_bytes < end && block.offset_bytes < other.offset_bytes + other.size_bytes) {
          alone = false;
          break;
        }
      if (alone) cut.emplace_back(block.offset_bytes, block.size_bytes);
    }
    // A plan left with nothing to place would be no plan: it keeps every block.
    if (cut.empty() || cut.size() == blocks.size()) return;
    std::sort(cut.begin(), cut.end());
    std::vector<std::size_t> cut_below(cut.size() + 1, 0);  // bytes cut below cut[i]
    for (std::size_t index = 0; index < cut.size(); ++index) cut_below[index + 1] = cut_below[index] + cut[index].second;
    std::size_t span = 0;
    for (const step_block& block : blocks) {
      planned_token& planned = plan_[block.phase];
      const auto at = std::lower_bound(cut.begin(), cut.end(), std::make_pair(block.offset_bytes, std::size_t{0}));
      if (at != cut.end() && at->first == block.offset_bytes) {  // no other block starts in a cut place
        planned.offset_bytes = -1;  // expected, not placed
        continue;
      }
      // Cut places lie wholly below or wholly above a kept block.
      const std::size_t offset = block.offset_bytes - cut_below[static_cast<std::size_t>(at - cut.begin())];
      planned.offset_bytes = static_cast<std::int64_t>(offset);
      span = std::max(span, offset + block.size_bytes);
    }
    span_bytes_ = span;
  } catch (...) {
    // No host memory: the plan keeps every block, as laid out.
    for (const step_block& block : blocks) plan_[block.phase].offset_bytes = static_cast<std::int64_t>(block.offset_bytes);
  }
}

}  // namespace fragless::core
