// Loop plans: a found step checked (closed, periodic) and laid out -- on the allocating
// thread, or for a large step on threads of its own while the loop goes on (Note [Layout
// threads]) -- then taken or refused (Note [Loop plans], Note [Refused layouts]), with the
// blocks a mapping of their own serves left out (Note [Mapped blocks in a plan]).
// Invariant: a layout thread sees only its own copy of the step and is joined (or, in a
// forked child, forgotten) before anything reads its result; two planned blocks whose
// lifetimes in the step overlap never overlap in address.
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

const char loop_plan::kLayoutTooWide[] = "layout too wide";
const char loop_plan::kFreesUnrecordedBlock[] = "frees a block made before recording began";

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
// 11 and 21), where starting the threads (about 50 us each) would hardly pay (but for its
// backward direction, where it needs one: Note [Directions at once]). The bound
// was 1,024 blocks with two orders; four take 3-5 ms for 1,000 blocks on the allocating
// thread, so it is 256 now. In a child forked while a layout was under way the thread does not
// exist: the child neither waits for it nor uses its result. loop_plan_threads:false lays
// out every step on the allocating thread. A large step whose placing starts at the very
// next event -- a whole pass, found where it ends -- is laid out at once too (up to a
// second or more; its orders on threads, and where it needs both directions each on a
// thread of its own, Note [Directions at once]); sending it to the threads and placing a
// step later hides that in a program whose steps take time, but costs a step of moves:
// tried and not kept (docs/compaction.md, "Tried and not kept: such a step laid out on
// threads, placing a step later").
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
  const auto [start_phase, peak_bytes] = set_step_start(blocks, step_tokens);
  auto job = std::make_unique<layout_job>();
  job->blocks = std::move(blocks);
  job->phases = step_tokens;
  job->peak_bytes = peak_bytes;
  job->churn_bytes = churn_bytes;
  job->step = step;
  job->started_ns = now_ns();
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
          running->span_bytes =
              lay_out_narrowest(running->blocks, running->phases, &running->cancelled, layout_threads::orders);
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
  // Note [Directions at once]: the program waits for this one, so both directions at once.
  job->span_bytes =
      lay_out_narrowest(job->blocks, job->phases, nullptr, waited_layout_threads(layout_threads_, job->blocks.size()));
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
