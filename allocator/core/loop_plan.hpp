// Loop plans: finds the repeating step of a loop in the large pool's allocations and
// frees, and lays that step's blocks out once, offline, so that every later step places
// each block at the same planned offset (Note [Loop plans]).
// Invariant: while a plan is active, two planned blocks whose lifetimes in the step overlap
// never overlap in address (checked when the plan is built); the plan is followed only
// while the events match it exactly, and the first mismatch abandons it.
// Plain C++, no device calls; not thread-safe (the large pool's device lock covers it). A
// large step is laid out on threads of its own, which see only a copy of the step and are
// joined before the plan uses their layout (Note [Layout threads] in loop_plan_layout.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/step_layout.hpp"
#include "core/stream_set.hpp"
#include "core/window_positions.hpp"

namespace fragless::core {

struct step_block;  // core/step_layout.hpp

// Note [Loop plans]
// Best-fit placement decides online, one request at a time. In a loop whose step touches
// more distinct pages than it holds at its peak (blocks of one step land where the next
// step's blocks cannot reuse them at the same moment), the page cache either moves pages
// every step (map/unmap calls) or keeps the extra pages (reserved memory),
// Note [Page moves]. But a training or inference loop repeats the same requests in the same order,
// so once a step has been seen the whole step is known in advance and can be laid out as
// an offline problem: a block's lifetime is an interval of the step, and two blocks may
// share addresses when their intervals do not meet.
//  - Recording: every allocation and free of the large pool becomes a token (size and
//    stream of an allocation; for a free, how many allocations ago the freed block was
//    made), whether the shared range served it or a mapping of its own (Note [Dedicated
//    mappings], Note [Stitching]): a huge request goes one way or the other by what the
//    cache holds at that moment (Note [Growth]), and a step must look the same either way.
//    When only shared-range blocks were tokens, a 1 GiB request that the recorded step
//    served from a cached mapping went to the shared range in a later step, the plan met
//    an allocation it did not expect and was abandoned (corpus huge-tensors seed 20:
//    1.23x the ideal, 1.014x now). Slabs and the exact start's small blocks (Note [Exact
//    start]) are left out: they follow the size classes' load, not the loop. A rolling
//    hash of the last kWindowTokens tokens finds the last time the same window occurred;
//    the distance is the candidate step length. One candidate is built per step: after
//    it, the next waits a step -- except one of another length when the last was rejected
//    for its shape (not closed, not periodic, a block outliving it). A step often holds a
//    shorter repeat (a pipeline's micro-batches, a model's layers) whose windows recur
//    first, and the wait then kept the true step's windows from being tried for a whole
//    wrong step, or several: corpus pipeline-1f1b seed 38 found candidates of 2,848, 2,960
//    and 3,128 events before its 3,576-event step, planned in the fourth repetition and
//    calling in the fifth; now planned in the second, with no call after the third. The
//    builds stay bounded: such early ones only while all builds since the log began have
//    examined at most two tokens per token logged (a build examines its step; one
//    candidate per step examined at most one), or four for a step that repeats the one
//    before it (Note [Repeated steps] in loop_plan.cpp).
//  - Building: the step is the tokens since that window. Recording starts at a page
//    move (or a cross-stream wait, Note [Waits as churn]), usually inside a step, so the first step found often frees a block made before
//    recording began and cannot be laid out; it is tried again as soon as a step no longer
//    reaches that free (the step ending there), not a whole step later: where a program
//    repeats as one step, that is a repetition earlier. It is planned only if it is
//    closed -- every block made in it is freed within one step (a parameter or a cache
//    that outlives a step is never in a plan; it stays placed as usual) -- and it moved
//    pages or waited for another stream (a loop that makes no device call keeps its
//    layout; one that only creates pages is still growing). Whether it is still settling is decided at its start (see
//    Following). Blocks
//    are laid out one by one, each in the smallest gap among the already placed blocks
//    whose lifetimes meet its own (lifetimes wrap around the step's end), in four orders
//    (Note [Layout orders]: largest first in two, the step's own order, size classes in
//    the step's order); the narrowest layout is taken if its
//    span is within (1 + loop_plan_headroom) x the step's peak live bytes. A step whose
//    layout was too wide is remembered and not laid out again (O(blocks^2) work).
//    A wider layout is weighed against what the loop costs without a plan: it keeps
//    moving pages, and the move budget (Note [Move budget]) makes it create what it
//    lacks instead, until reserved memory covers the pages its step touches over time.
//    So a layout is also taken if it spans at most (1 + loop_plan_churn_headroom) x the
//    peak and its excess over the peak is no more than the pages the step churned (moved,
//    or created past the budget) -- what the budget would create for the loop. Without
//    that rule, corpus many-stream seeds ended at 1.09x the ideal after five repetitions
//    (seed 22: 1.33x, where its plan holds 1.06x); with it, 1.058x (40 seeds). A flat
//    10 % headroom gave the same there, but it also took layouts 8 % wide for loops that
//    churn a few pages a step, whose budget ends near 1.01x (params-optimizer seed 171:
//    1.084x against 1.012x).
//  - Following: events are compared with the plan from the moment it is built, and
//    placing starts after the event that leaves the step's least live bytes (between two
//    steps of a training loop, usually nothing of the step is live), so the blocks placed
//    before the plan and the planned ones overlap the least. The large pool then reserves
//    one address range of the plan's span (a free-index segment of its own, which
//    ordinary placement never uses) and places the k-th request of each step at its
//    planned offset, after the usual stream ordering (Note [Stream reuse]) -- a huge one
//    too, rather than in a mapping of its own: the layout holds the whole step, and the
//    mappings the step used before become idle and are given back when the range's pages
//    are made (Note [Growth]). Only a block the step served from a mapping of its own
//    and to whose place the layout puts no other block is left out, and keeps its
//    mapping (Note [Mapped blocks in a plan] in loop_plan_layout.cpp). The range lies where its
//    hand-over creates the fewest pages (Note [Hand-over pages] in
//    loop_plan_hand_over.cpp), and among such places where it covers the most cached free
//    pages (the window of its span, inside one free range, holding the most; the top of
//    the free address space when none holds any), so that it starts on the loop's own
//    pages. Before choosing, the pool has its owner give back the empty slabs the small
//    pool keeps as a cache: best fit put them anywhere, and between two steps they are
//    often all that is live there, splitting the free space the range needs. The pages
//    the range lacks are moved in from the loop's old pages; a run no cached chunk fits
//    (each is larger than the room there) releases an idle one outside the range before
//    its pages are created, so the hand-over does not grow reserved memory. The range's
//    pages are never taken by page moves and stay mapped from step to step: a loop whose
//    plan fits makes no map/unmap call from its first fully planned step on. The step that hands over moves only what the range lacked. (At
//    the top of the free space always, a block kept above the loop's pages put the range
//    past it, and the hand-over moved every page in: docs/compaction.md.)
//    A loop whose moves stop after a step or two is settling, and a plan would cost it a
//    hand-over for nothing. So the hand-over is weighed as renting against buying: the
//    loop pays rent, its churn, every step it goes unplanned, and the plan is bought once
//    its hand-over moves no more than the rent already paid (the step it was built from,
//    and each step it waited since) plus kHandOverPaybackSteps (32) steps more at the
//    latest step's rate. A dearer plan waits a step; a step that moves nothing drops it
//    (not a failure: the loop settled). As in ski rental, neither choice can cost much
//    more than the other would have: a loop that keeps churning pays no more rent than
//    the hand-over before it is bought, and a hand-over made just before the loop settles
//    wastes at most the rent paid and 32 steps' churn. The 32 steps are short against the
//    thousands a training or serving loop runs, and far from a settling loop's ratio:
//    params-optimizer seed 972 moved one 2 MiB page a step where its hand-over would move
//    2.3 GB, 1,162 steps' worth. (Before: a dearer plan started
//    after any one more moving step -- that seed's hand-over of 524 chunks, one step
//    before it settled -- and at once when the hand-over moved no more than one step's
//    churn; with 128 steps instead of 32, seeds whose loops had nearly settled handed over
//    in the fifth repetition: docs/compaction.md.)
//  - Deviation: another size or stream, a free out of order, a planned place still in
//    use or a device failure abandons the plan: the request is placed as usual, the
//    range returns to ordinary placement at once (its live blocks stay where they are)
//    and recording starts again -- or goes on, where the plan had not yet placed a whole
//    step (Note [Log through a plan's first step]). A deviating allocation abandons the plan before it is
//    placed: placed while the range was still held, it could neither use the range's
//    free address space nor move its cached pages (Note [Page moves]), and got new pages
//    beside the range, which stayed reserved (corpus quantized-attention, where a plan
//    over one batch's layers ends at the next batch: seed 403 1.63x the live peak, 1.14x
//    now; docs/compaction.md). Afterwards only a longer step is planned -- a layer
//    inside a step repeats too, and must not win over the step -- until a whole log
//    (kMaxLogTokens) passes without a plan. Before any plan, steps of kMinStepTokens
//    (four allocations and their frees) and more are planned: a short loop (a decode step
//    of a few tensors) is the step itself, and a layer mistaken for the step is abandoned
//    where the layers end, as above. Steps shorter than two windows (64 tokens) used to
//    wait for a whole log, about 5,000 steps of such a loop, all moving pages; on the
//    corpus, whose steps are long, the change moved 8 of 8,000 seeds.
//  - Failing: a plan with no address range or a whole log without a plan (unless it
//    churned by waits alone, Note [Waits as churn]) mark planning as failed for good
//    (planning_failed()); from then on the pool's page moves are
//    budgeted (Note [Move budget]). A step whose layout was too wide is followed as a plan
//    is, placing nothing, and planning counts as failed once the program has followed it a
//    whole step and while it keeps to it: when it leaves the step, that loop has ended,
//    and the budget with it (the step is followed again if found again, and not laid out
//    again). The refused layout is kept, and taken once reserved memory holds it (Note
//    [Refused layouts] in vmm_pool_plans.cpp): the budget does not create past it. An
//    abandoned plan is no failure either: the loop it planned ended (a phase of the
//    program, or a layer taken for the step), which says nothing of whether the next loop
//    can be planned.
// Where it costs: recording is a hash-table lookup (Note [Window positions]) per large
// event while no plan is active, from the pool's first page move or cross-stream wait on
// (a pool that never does either records nothing, and recording pauses again after
// kMaxLogTokens events without a move);
// following is one comparison per event; laying a step out is blocks^2 work, on threads
// of their own for a large step (Note [Layout threads]).
// Note [Waits as churn] (vmm_pool_plans.cpp): what a pool has paid so far for loops no
// plan places, in bytes of pages moved: pages it moved (or created past the move budget),
// and the cross-stream waits it made, each at a page move's price over kWaitsPerPageMove.
struct loop_churn {
  static constexpr std::int64_t kWaitsPerPageMove = 100;
  std::int64_t moved_bytes = 0;
  std::int64_t waited_bytes = 0;
  std::int64_t total_bytes() const noexcept { return moved_bytes + waited_bytes; }
  bool operator==(const loop_churn&) const = default;
};

struct loop_token {
  std::uint64_t size_bytes = 0;  // allocation: its size; free: 0
  std::uint64_t age = 0;         // free: allocations since the freed block was made (>= 1)
  stream_id stream = nullptr;    // allocation: its stream
  bool operator==(const loop_token&) const = default;
};

// The plan's counters, one per row of core/stat_sources.def.
struct loop_plan_counters {
#define FRAGLESS_LOOP_PLAN_COUNTER(member, stat, description) std::int64_t member = 0;
#define FRAGLESS_LOOP_PLAN_LOCAL_COUNTER(member, description) std::int64_t member = 0;
#include "core/stat_sources.def"
};

class loop_plan {
 public:
  // Tokens of the window that identifies a step, and bounds on what is recorded/planned.
  static constexpr std::size_t kWindowTokens = 32;
  static constexpr std::size_t kMaxLogTokens = std::size_t{1} << 17;
  static constexpr std::size_t kRememberedRejections = 16;
  // Note [Loop plans]: steps of churn at the loop's latest rate that a hand-over may cost.
  static constexpr std::size_t kHandOverPaybackSteps = 32;
  // The shortest step planned (Note [Loop plans]): four allocations and their frees.
  static constexpr std::size_t kMinStepTokens = 8;
  static constexpr std::size_t kMaxPlannedBlocks = std::size_t{1} << 15;
  // Note [Repeated steps]: positions compared between a step and the one before it.
  static constexpr std::size_t kRepeatSamples = 64;
  static constexpr std::size_t kRepeatSamplesNeeded = 16;

  // Note [Layout threads]: a step of at least this many blocks is laid out on threads of
  // its own (with `layout_threads`, the loop_plan_threads option) while the loop goes on.
  static constexpr std::size_t kLayoutThreadBlocks = core::kLayoutThreadBlocks;

  // Note [Loop plans]: a plan's span may exceed the step's peak live bytes by
  // `headroom_fraction` (the loop_plan_headroom option), or by up to
  // `churn_headroom_fraction` (loop_plan_churn_headroom) where the step's churn pays for
  // the excess. Starts disabled.
  explicit loop_plan(double headroom_fraction, double churn_headroom_fraction = 0, bool layout_threads = true,
                     bool stream_affinity = true) noexcept;
  ~loop_plan();
  loop_plan(const loop_plan&) = delete;
  loop_plan& operator=(const loop_plan&) = delete;

  void set_enabled(bool enabled) noexcept;
  bool enabled() const noexcept { return enabled_; }

  // Hot for planned loops: the offset (from the plan's base) the next allocation gets if it
  // is the one the active plan expects; nullopt otherwise.
  std::optional<std::size_t> planned_offset(std::size_t size_bytes, stream_id stream) const noexcept;
  // While the plan places blocks: an allocation of this size and stream is not the one it
  // expects next (a deviation; the caller abandons the plan before placing it).
  bool deviates(std::size_t size_bytes, stream_id stream) const noexcept;
  // Records an allocation of the large pool. A request the plan expected but could not
  // place at its planned offset was a deviation, and the caller abandoned the plan before
  // placing it. `churn`: the pool's churn so far (loop_churn). `own_mapping`: a dedicated or stitched mapping served it, not
  // the shared range (Note [Mapped blocks in a plan]). Returns the allocation's sequence
  // number, which record_release takes back.
  std::uint64_t record_allocation(std::size_t size_bytes, stream_id stream, const loop_churn& churn,
                                  bool own_mapping = false) noexcept;
  void record_release(std::uint64_t sequence, const loop_churn& churn) noexcept;

  // A plan that reached its first planned event and waits for its address range.
  bool plan_pending() const noexcept { return pending_; }
  std::size_t plan_span_bytes() const noexcept { return span_bytes_; }
  // Note [Hand-over pages]: for the plan about to start, counts[p] = how many of the
  // first p pages of its span a block lies on that the first step makes before its last
  // free of a block made before the plan (span pages + 1 entries; all 0 when none is).
  std::vector<std::size_t> early_page_counts(std::size_t page_bytes) const;
  // The caller reserved the range (activate) or could not (reject).
  void activate() noexcept;
  void reject() noexcept;
  // Note [Loop plans]: the most a hand-over may move now -- what the loop churned
  // without the plan (the step it was built from and each step it waited since) and
  // kHandOverPaybackSteps more steps at its latest step's churn; a dearer hand-over
  // waits: postpone() waits one more step (the plan is dropped, not failed, if that step
  // moves nothing).
  std::size_t hand_over_allowance_bytes() const noexcept;
  // Note [Waits as churn]: whether the churn behind the plan includes pages moved, not
  // only waits (a plan paid for by waits alone may set no new peak).
  bool hand_over_paid_by_moves() const noexcept { return paid_by_moves_; }
  void postpone() noexcept;
  // Note [Page moves]: whether any plan of this pool has waited to hand over (postpone()).
  bool hand_over_waited() const noexcept { return hand_over_waited_; }
  // Blocks are being placed by the plan (its range must exist).
  bool active() const noexcept { return placing_; }
  // Leaves the active plan (a deviation the caller saw); recording starts again, or goes on
  // (Note [Log through a plan's first step]).
  void abandon(const char* reason) noexcept;

  // Note [Layout threads]: a step's layout is under way on a thread of its own.
  bool layout_under_way() const noexcept { return layout_ != nullptr; }

  const loop_plan_counters& counters() const noexcept { return counters_; }
  // Note [Move budget]: a plan cannot help the loop -- the program keeps to a step whose
  // layout was too wide, and has followed it a whole step since it was refused or found
  // again; or a plan found no address range, or a whole log passed without a plan (or
  // plans are off). An abandoned plan is none of these.
  bool planning_failed() const noexcept {
    return !enabled_ || planning_failed_ || (refused_ && refused_events_followed_ >= plan_.size());
  }
  // Note [Refused layouts]: the program keeps to a step refused as too wide, whose layout
  // is kept; its span; whether the step is at the event where placing would start.
  bool refused_layout_kept() const noexcept { return refused_ && refused_layout_; }
  std::size_t refused_span_bytes() const noexcept { return refused_span_bytes_; }
  bool at_step_start() const noexcept { return active_ && phase_ == start_phase_; }
  // Note [Refused layouts]: the refused step becomes a pending plan with its kept layout.
  void take_refused_layout() noexcept;

 private:
  // Why a step is not planned, compared by address (build_plan, look_for_step): arrays
  // defined once, in loop_plan_layout.cpp -- a string literal's address may differ between
  // translation units (sanitizer builds do not merge them).
  static const char kLayoutTooWide[];
  static const char kFreesUnrecordedBlock[];
  struct logged_token {
    loop_token token;
    std::uint64_t sequence;  // allocation: its own; free: the freed block's
    loop_churn churn;
    bool own_mapping = false;  // allocation: served by a mapping of its own
  };
  bool recording(const loop_churn& churn) noexcept;
  void append(const logged_token& entry) noexcept;
  void clear_log() noexcept;
  // Note [Loop plans]: tries the step that ends at the newest token.
  void look_for_step();
  // The last free in log positions [step_begin, step_end) of a block made before the log
  // began; step_begin when there is none.
  std::size_t last_free_of_unrecorded_block(std::size_t step_begin, std::size_t step_end) const noexcept;
  bool repeats_step_before(std::size_t newest, std::size_t step_tokens) const noexcept;
  // nullptr when planned, else why not.
  // `churn_bytes`: what the step moved (or created past the move budget).
  const char* build_plan(std::size_t step_begin, std::size_t step_end, std::size_t churn_bytes,
                         std::pair<std::uint64_t, std::size_t> step);
  void follow(const loop_token& token) noexcept;
  // Note [Layout threads]
  struct layout_job;
  // Waits for the layout under way and takes it. False when it was too wide (refused as a
  // layout too wide at once is; the log, recorded meanwhile, goes on) or could not be made
  // (the plan is dropped, and recording starts again).
  bool finish_layout() noexcept;
  // Stops the layout under way, if any, and waits for its threads.
  void cancel_layout() noexcept;
  // The plan's offsets and span from a finished layout; the reason when it is not taken.
  const char* take_layout(const layout_job& job) noexcept;
  // Note [Mapped blocks in a plan]: cuts the places of blocks the step served from
  // mappings of their own, where the layout puts no other block, out of the plan's offsets
  // and span; their requests stay expected but are not placed.
  void leave_out_mapped_blocks(const std::vector<step_block>& blocks) noexcept;
  // Leaves the plan before it placed anything; recording starts again.
  void drop_plan() noexcept;
  // The plan's tokens: those of log positions [step_begin, step_end), no offsets yet.
  void load_step(std::size_t step_begin, std::size_t step_end);
  // Note [Move budget]: a step whose layout was too wide is not laid out again, and the
  // loop is followed along it, placing nothing, while it keeps to it.
  void remember_rejection(std::pair<std::uint64_t, std::size_t> step) noexcept;
  // `with_layout`: plan_ already holds the step with its too-wide layout's offsets.
  void follow_refused(std::size_t step_begin, std::size_t step_end, bool with_layout) noexcept;

  bool enabled_ = false;
  bool planning_failed_ = false;  // Note [Move budget]: for good
  bool refused_ = false;          // Note [Move budget]: following a step refused as too wide
  std::size_t refused_events_followed_ = 0;  // Note [Move budget]: since refused_ was set
  // Note [Refused layouts]: plan_ holds the refused step's layout: its whole span, and the
  // span of the blocks it places (Note [Mapped blocks in a plan]). Set wherever refused_ is
  // set, and read only with it (refused_layout_kept()), so never cleared on its own.
  bool refused_layout_ = false;
  std::size_t refused_span_bytes_ = 0;
  std::size_t refused_placed_span_bytes_ = 0;
  const double headroom_;
  const double churn_headroom_;
  const bool layout_threads_;           // Note [Layout threads]
  const bool stream_affinity_;          // Note [Stream affinity]
  std::unique_ptr<layout_job> layout_;  // the layout under way, if any
  loop_plan_counters counters_;
  std::uint64_t next_sequence_ = 1;

  // Recording
  bool recording_ = false;
  loop_churn churn_when_paused_;
  bool waits_exhausted_ = false;  // Note [Waits as churn]: a whole log of waits found no plan
  std::vector<logged_token> log_;
  std::uint64_t first_logged_sequence_ = 0;        // sequence of the log's first allocation
  std::vector<std::size_t> allocation_positions_;  // sequence - first -> log position
  window_positions window_ends_;  // window hash -> log position (Note [Window positions])
  std::uint64_t window_hash_ = 0;
  std::size_t next_build_position_ = 0;  // Note [Loop plans]: one candidate per step
  std::size_t waiting_step_tokens_ = 0;   // the length that waits for it (0: every length)
  std::size_t built_tokens_ = 0;          // tokens of the steps built since the log began

  // The plan: one entry per token of the step.
  struct planned_token {
    loop_token token;
    // Allocation: planned offset, or -1 when left out (Note [Mapped blocks in a plan]);
    // free: -1.
    std::int64_t offset_bytes;
    bool own_mapping;  // allocation: the recorded step served it from a mapping of its own
  };
  std::vector<planned_token> plan_;
  std::size_t span_bytes_ = 0;
  std::size_t phase_ = 0;        // index of the next expected token
  std::size_t start_phase_ = 0;  // placing starts here: the step's least live bytes
  std::size_t paid_churn_bytes_ = 0;        // churn of the steps behind the plan
  std::size_t last_step_churn_bytes_ = 0;   // churn of the latest of them
  bool paid_by_moves_ = false;              // the paid churn includes pages moved (Note [Waits as churn])
  bool postponed_ = false;                  // waiting one step, churning toward the hand-over
  bool hand_over_waited_ = false;           // sticky: some plan was postponed (Note [Page moves])
  loop_churn churn_when_postponed_;
  loop_churn latest_churn_;                 // the pool's churn at the latest event
  bool active_ = false;          // events are compared with the plan
  bool pending_ = false;         // at start_phase_, waiting for activate()/reject()
  bool placing_ = false;         // blocks are placed by the plan
  // Note [Log through a plan's first step]: recording goes on from a plan's build until it
  // has placed a whole step.
  bool log_through_plan_ = false;
  // Note [Loop plans]: after a plan is abandoned only longer steps are planned, until the
  // log fills once without a plan; steps already rejected are not built again.
  std::size_t min_step_tokens_ = kMinStepTokens;
  std::vector<std::pair<std::uint64_t, std::size_t>> rejected_steps_;  // (window hash, length)
};

}  // namespace fragless::core
