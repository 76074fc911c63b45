// Step layout: several greedy orders, the narrowest layout kept (Note [Layout orders]),
// refined (Note [Layout refinement]), searched once more where it stays above the step's
// peak (Note [Skyline layout] in skyline_layout.cpp) and then laid out as a ring (Note
// [Ring layout] in ring_layout.cpp); where the step is still wider than its peak, all of
// that again on the step run backwards (Note [Time reversal]; where the caller waits,
// beside the forward search, Note [Directions at once] in backward_direction.cpp) and,
// still above the peak, the narrower repaired (Note [Layout repair] in layout_repair.cpp;
// where the caller waits, each direction's repair as soon as it may be kept, Note
// [Repairs at once]); then, within the span, the blocks moved towards their own streams'
// places (Note [Stream affinity] in stream_affinity.cpp).
#include "core/step_layout.hpp"

#include "core/backward_direction.hpp"
#include "core/lifetime_columns.hpp"
#include "core/placed_runs.hpp"
#include "core/ring_layout.hpp"
#include "core/skyline_layout.hpp"
#include "core/stream_affinity.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <iterator>
#include <optional>
#include <thread>

namespace fragless::core {

std::vector<std::size_t> placing_order(const std::vector<step_block>& blocks, layout_order order) {
  std::vector<std::size_t> indices(blocks.size());
  for (std::size_t index = 0; index < indices.size(); ++index) indices[index] = index;
  const auto by = [&](auto less) { std::sort(indices.begin(), indices.end(), less); };
  switch (order) {
    case layout_order::size_then_lifetime:
    case layout_order::size_then_start:
      by([&](std::size_t a, std::size_t b) {
        if (blocks[a].size_bytes != blocks[b].size_bytes) return blocks[a].size_bytes > blocks[b].size_bytes;
        if (order == layout_order::size_then_lifetime && blocks[a].lifetime() != blocks[b].lifetime())
          return blocks[a].lifetime() > blocks[b].lifetime();
        return blocks[a].phase < blocks[b].phase;
      });
      break;
    case layout_order::step:
      by([&](std::size_t a, std::size_t b) { return blocks[a].from_start < blocks[b].from_start; });
      break;
    case layout_order::size_class_then_step:
      by([&](std::size_t a, std::size_t b) {
        const std::size_t class_a = std::bit_width(blocks[a].size_bytes), class_b = std::bit_width(blocks[b].size_bytes);
        if (class_a != class_b) return class_a > class_b;
        return blocks[a].from_start < blocks[b].from_start;
      });
      break;
  }
  return indices;
}

std::size_t lay_out(std::vector<step_block>& blocks, layout_order order, const std::atomic<bool>* cancel) {
  return lay_out_in(blocks, placing_order(blocks, order), cancel);
}

// Note [Layout race]
// The narrowest of the orders' layouts wins, the earliest order among equal spans (Note
// [Layout orders]), and a layout's span only grows as its blocks are placed. So an order
// whose partial span is already above a finished order's span, or equal to that of a
// finished earlier order, cannot win, and stops there: the layout taken is the one that
// would have been taken, whatever the threads' timing, for less work. Serially the first
// order always finishes and bounds the others; laid out on the allocating thread (a step
// of fewer than kLayoutThreadBlocks blocks, Note [Layout threads]) that work is the
// program's time: corpus unet-resolution seed 1's 113-block step took 110-150 us there,
// in a pass of about 300 us. No layout is narrower than the step's peak, so an order that
// finishes at the peak has won against every later order before they place a block: they
// are not laid out at all. A training step most often lays out at its peak in its first
// order: `fragless-bench layout --seeds 300` (one thread), the 229 steps of corpus
// unet-resolution below kLayoutThreadBlocks blocks took 0.164 -> 0.085 ms at the median
// (the median of three runs), the 780 such steps of five training families 0.11 -> 0.06
// ms, and every one of 4,200 steps of all families laid out exactly as before.
bool layout_race::beaten(std::size_t order_index, std::size_t partial_span) const noexcept {
  for (std::size_t other = 0; other < kLayoutOrderCount; ++other) {
    if (other == order_index) continue;
    const std::size_t span = finished_spans[other].load(std::memory_order_relaxed);
    if (span == kRunning) continue;
    if (partial_span > span || (other < order_index && (partial_span >= span || span <= floor_bytes))) return true;
  }
  return false;
}

// Note [Time buckets] in placed_runs.cpp: a block touching at most this many of a large
// step's time buckets tests only the words with a candidate; one touching more, every word
// (ORing its rows would cost about as much as the tests).
constexpr unsigned kFilterBuckets = 16;
constexpr std::size_t kBucketedBlocks = 2048;
constexpr std::size_t kShortLivedFraction = 16;

// Note [Exact gaps]
// The greedy stage takes the smallest gap that holds the block, the lowest among equals,
// so a gap of exactly the block's size, once found, is the answer: a later gap can be no
// smaller, and an equal one is higher. The walk over the placed blocks stops there. In
// training steps, whose blocks of a size come and go together, that is most blocks after
// the first of their size. The same offsets: `fragless-bench layout --seeds 200`, the
// offsets digest of all 3,400 passes unchanged; corpus rlhf-ppo seed 842's 19,243-block
// pass 783 -> 679 ms (two alternated runs each); the whole run's layout time 0.95x in one
// run each, which this machine's noise does not separate from a few percent.

// Each block in turn, in the smallest gap among the placed blocks it meets (lowest
// offset among equals), else above them all. Sets every block's offset; returns the span.
// The placed blocks are kept in (offset, end) order (in runs, Note [Placed runs] in
// placed_runs.cpp), so the blocks a new one meets come out sorted without a sort per
// block (the sort was half of a 3,000-event step's layout). Which of them it meets is
// asked 64 at a time of their lifetimes kept as columns (Note [Lifetime columns]), of the
// words that may hold one (Note [Time buckets]); only those are visited.
// (docs/compaction.md has the faster searches tried.)
// Returns 0 at once when `cancel` is set (Note [Layout threads] in loop_plan_layout.cpp).
std::size_t lay_out_in(std::vector<step_block>& blocks, const std::vector<std::size_t>& order,
                       const std::atomic<bool>* cancel, const layout_race* race, std::size_t order_index) {
  // Note [Time buckets] in placed_runs.cpp: kept where they pay -- a step of at least
  // kBucketedBlocks blocks, three in four of them living at most 1/kShortLivedFraction of
  // it; elsewhere keeping them costs more than the tests they spare.
  std::size_t phases = 0;
  bool bucketed = false;
  if (blocks.size() >= kBucketedBlocks) {
    std::size_t short_lived = 0;
    for (const step_block& block : blocks)
      phases = std::max({phases, block.first_end, block.first_begin + 1, block.second_end});
    for (const step_block& block : blocks)
      if (block.lifetime() * kShortLivedFraction <= phases) ++short_lived;
    bucketed = 4 * short_lived >= 3 * blocks.size();
  }
  placed_runs placed(blocks.size(), phases, bucketed);
  std::size_t span = 0;
  for (std::size_t index : order) {
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) return 0;
    step_block& block = blocks[index];
    std::size_t covered = 0;
    std::size_t best_offset = SIZE_MAX, best_gap = SIZE_MAX;
    const auto begin = static_cast<std::uint32_t>(block.first_begin), end = static_cast<std::uint32_t>(block.first_end),
               second_end = static_cast<std::uint32_t>(block.second_end);
    // Note [Time buckets] (placed_runs.cpp): a block touching few buckets tests only the
    // words holding a block that touches one of them.
    const std::uint64_t buckets = placed.bucketed() ? placed.bucket_mask(begin, end, second_end) : 0;
    const bool filtered = placed.bucketed() && static_cast<unsigned>(std::popcount(buckets)) <= kFilterBuckets;
    std::uint64_t candidates[placed_runs::kRunWords];
    // Note [Exact gaps]: a gap of exactly the block's size ends the search.
    for (const placed_runs::run& run : placed.runs()) {
      if (filtered) placed_runs::candidates(run, buckets, candidates);
      for (std::size_t word = 0; word * 64 < run.extents.size(); ++word) {
        if (filtered && candidates[word] == 0) continue;
        for (std::uint64_t bits = run.lifetimes.meeting_bits(word, begin, end, second_end); bits != 0; bits &= bits - 1) {
          const placed_runs::extent& other = run.extents[word * 64 + static_cast<std::size_t>(std::countr_zero(bits))];
          if (other.offset_bytes > covered && other.offset_bytes - covered >= block.size_bytes &&
              other.offset_bytes - covered < best_gap) {
            best_gap = other.offset_bytes - covered;
            best_offset = covered;
            if (best_gap == block.size_bytes) goto chosen;
          }
          covered = std::max(covered, other.end_bytes);
        }
      }
    }
  chosen:
    block.offset_bytes = best_offset != SIZE_MAX ? best_offset : covered;
    if (block.offset_bytes + block.size_bytes > span) {
      span = block.offset_bytes + block.size_bytes;
      if (race != nullptr && race->beaten(order_index, span)) return layout_race::kBeaten;  // Note [Layout race]
    }
    placed.insert({block.offset_bytes, block.offset_bytes + block.size_bytes}, begin, end, second_end);
  }
  return span;
}

// Note [Layout orders]
// No order is best everywhere, so the step is laid out in four and the narrowest layout
// wins. Largest first (the two size orders) packs training steps, whose blocks of a size
// come and go together: on the replayed traces starts-first was up to 2.6 % narrower than
// lifetimes-first, lifetimes-first up to 3 %. It is a poor order for serving loops, whose
// many caches of growing sizes it stacks where the step's own order reuses the gaps the
// freed caches leave: corpus kv-cache-eviction layouts 1.22-1.51x their step's peak. The
// step's order alone loses the other way (training steps 1.01-1.19x). Between the two,
// size classes (powers of two) in the step's order within each class: big blocks still
// first, and blocks of like size follow the step. Measured (layout span over the step's
// peak, the first layout of 154 corpus workloads, seeds 1-60 of kv-cache-eviction and
// many-streams and 1-25 of the other families, where a plan was laid out): the two size
// orders 1.061x geomean, taken by the plan rules on 124; all four 1.031x, 139; the 10
// replayed traces with a layout 1.0038x -> 1.0027x.
// Note [Layout threads]: the orders are independent, so a large step's layout runs each on a
// thread of its own, joined before this returns: the same layout, in the time of the
// slowest order where the machine has a core for each.
namespace {

// The greedy stage of one direction of lay_out_narrowest (Note [Time reversal]): every
// order, the narrowest kept in `blocks`, its placing sequence in `best_sequence`. Returns
// its span (0 when cancelled). `peak_bytes` is the step's peak, the same in either
// direction.
std::size_t lay_out_orders(std::vector<step_block>& blocks, std::size_t peak_bytes, const std::atomic<bool>* cancel,
                           bool threads, std::vector<std::size_t>& best_sequence) {
  // Orders that place the blocks in the same sequence give the same layout: each distinct
  // sequence is laid out once (the two size orders agree wherever no two blocks of one
  // size differ in start and lifetime order, as in most serving steps).
  std::vector<std::size_t> sequences[kLayoutOrderCount];
  bool distinct[kLayoutOrderCount] = {};
  for (std::size_t index = 0; index < kLayoutOrderCount; ++index) {
    sequences[index] = placing_order(blocks, kLayoutOrders[index]);
    distinct[index] = std::none_of(sequences, sequences + index, [&](const std::vector<std::size_t>& earlier) {
      return earlier == sequences[index];
    });
  }
  std::vector<step_block> laid_out[kLayoutOrderCount];
  std::size_t spans[kLayoutOrderCount] = {};
  bool done[kLayoutOrderCount] = {};
  for (std::size_t index = 0; index < kLayoutOrderCount; ++index)
    if (distinct[index]) laid_out[index] = blocks;
  layout_race race;  // Note [Layout race]
  race.floor_bytes = peak_bytes;
  const auto run = [&](std::size_t index) {
    spans[index] = lay_out_in(laid_out[index], sequences[index], cancel, &race, index);
    if (spans[index] != layout_race::kBeaten) race.finished_spans[index].store(spans[index], std::memory_order_relaxed);
    done[index] = true;
  };
  // Distinct orders after the first each on a thread of their own, the first here.
  std::thread workers[kLayoutOrderCount];
  for (std::size_t index = 1; index < kLayoutOrderCount && threads; ++index) {
    if (!distinct[index]) continue;
    try {
      workers[index] = std::thread([&run, index] {
        try {
          run(index);
        } catch (...) {
          // no host memory there: laid out again here, after the join
        }
      });
    } catch (...) {
      break;  // no thread to be had: the rest here
    }
  }
  const auto join_all = [&] {
    for (std::thread& worker : workers)
      if (worker.joinable()) worker.join();
  };
  try {
    run(0);
  } catch (...) {
    join_all();
    throw;
  }
  join_all();
  std::size_t best = 0;
  for (std::size_t index = 0; index < kLayoutOrderCount; ++index) {
    if (!distinct[index]) continue;
    if (!done[index]) {
      if (race.beaten(index, 0)) {  // an earlier order finished at the peak
        spans[index] = layout_race::kBeaten;
        done[index] = true;
      } else {
        run(index);
      }
    }
    if (spans[index] < spans[best]) best = index;
  }
  blocks = std::move(laid_out[best]);
  best_sequence = std::move(sequences[best]);
  return spans[best];
}

// The rest of one direction: the greedy stage's layout refined, searched on and tried as a
// ring. Returns the span (0 when cancelled).
std::size_t search_on(std::vector<step_block>& blocks, std::size_t phases, std::size_t peak_bytes,
                      std::vector<std::size_t> sequence, std::size_t span_bytes, const std::atomic<bool>* cancel) {
  const std::size_t refined_span = refine_layout(blocks, std::move(sequence), span_bytes, cancel);
  if (refined_span == 0) return 0;  // cancelled
  const std::size_t searched_span = skyline_layout(blocks, refined_span, cancel);  // Note [Skyline layout]
  if (searched_span == 0) return 0;                                                 // cancelled
  return ring_layout(blocks, phases, peak_bytes, searched_span, cancel);  // Note [Ring layout]
}

}  // namespace

std::size_t lay_out_one_direction(std::vector<step_block>& blocks, std::size_t phases, std::size_t peak_bytes,
                                  const std::atomic<bool>* cancel, bool threads) {
  std::vector<std::size_t> sequence;
  const std::size_t span = lay_out_orders(blocks, peak_bytes, cancel, threads, sequence);
  if (span == 0) return 0;  // cancelled
  return search_on(blocks, phases, peak_bytes, std::move(sequence), span, cancel);
}

std::vector<step_block> time_reversed(const std::vector<step_block>& blocks, std::size_t phases) {
  std::vector<step_block> reversed = blocks;
  for (step_block& block : reversed) {
    const std::size_t lifetime = block.lifetime();
    // [begin, phases) + [0, second_end) -> [phases - second_end, phases) + [0, phases - begin)
    if (block.second_end > 0) {
      const std::size_t begin = phases - block.second_end, second_end = phases - block.first_begin;
      block.first_begin = begin;
      block.first_end = phases;
      block.second_end = second_end;
    } else {  // [begin, end) -> [phases - end, phases - begin)
      const std::size_t begin = phases - block.first_end, end = phases - block.first_begin;
      block.first_begin = begin;
      block.first_end = end;
    }
    // Placing starts at the same cut between phases, now walked backwards: a block made
    // first from there is the one freed last before the cut comes round again.
    block.from_start = (2 * phases - block.from_start - lifetime) % phases;
  }
  return reversed;
}

// Note [Time reversal]
// Which blocks may share addresses depends only on which lifetimes meet, and a step run
// backwards -- every free made an allocation and every allocation a free, in reverse --
// has the same lifetimes meeting: any layout of one is a layout of the other. The greedy
// orders and the search are not symmetric, though: each places a block knowing what was
// placed before it, and the orders that follow the step (Note [Layout orders]) see its
// blocks in the order the program makes them. A cache that grows the eager way (a longer
// copy made, then the old one freed) is the case they lay out worst: each new copy is the
// largest block so far and must miss the one it replaces, so it goes above both. Backwards
// the same step is a cache that shrinks -- a shorter copy made beside the old one, which
// then leaves a gap the next, shorter still, fits -- and the same orders lay it out
// close to its peak. So a step still wider than its peak after every order, refining and
// the search is laid out again, whole, in reverse, and the narrower of the two layouts
// kept (the forward one on equal spans). Steps that reach their peak forward pay nothing;
// the others twice their layout work (with threads, the two directions at once: Note
// [Directions at once]). Measured on the first layouts of seeds 1-20 of every
// family (227 steps, a debug dump, not committed): 1.0145x the step's peak -> 1.0115x,
// geometric mean; every step that changed is a `kv-cache-eviction` one, 17 of its 32
// narrower, 1.078x -> 1.056x (seed 537 1.103x -> 1.010x, seed 404 1.194x -> 1.095x); the
// other families' steps are at their peak forward or no narrower backwards.
std::size_t lay_out_narrowest(std::vector<step_block>& blocks, std::size_t phases, const std::atomic<bool>* cancel,
                              layout_threads threading) {
  const bool threads = threading == layout_threads::orders || threading == layout_threads::orders_and_backward;
  const std::size_t peak_bytes = step_peak_bytes(blocks);
  std::vector<std::size_t> sequence;
  std::size_t span = lay_out_orders(blocks, peak_bytes, cancel, threads, sequence);
  if (span == 0) return 0;  // cancelled
  // Note [Directions at once]: where the caller waits, the backward direction starts beside
  // the forward search wherever the greedy stage leaves the step above its peak.
  std::optional<backward_direction> backward;
  if ((threading == layout_threads::backward || threading == layout_threads::orders_and_backward) && span > peak_bytes) {
    backward.emplace(blocks, phases, peak_bytes, threads);
    if (!backward->start(cancel)) backward.reset();
  }
  span = search_on(blocks, phases, peak_bytes, std::move(sequence), span, cancel);
  if (span == 0) return 0;  // cancelled (the backward thread is stopped as `backward` goes)
  if (span > peak_bytes) {
    // The narrower direction (the forward one on equal spans), repaired where it is still
    // above the peak (Note [Layout repair]; Note [Repairs at once] where the caller waits).
    if (!backward) backward.emplace(blocks, phases, peak_bytes, threads);
    span = backward->keep_narrower_repaired(blocks, span, cancel);
    if (span == 0) return 0;  // cancelled
  }
  backward.reset();  // still running only where the forward layout reached the peak: cancelled
  settle_stream_affinity(blocks, phases, span, cancel);  // Note [Stream affinity]
  if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) return 0;
  return span;
}

std::vector<std::int64_t> step_live_changes(const std::vector<step_block>& blocks, std::size_t phases) {
  std::vector<std::int64_t> live_change(phases + 1, 0);
  for (const step_block& block : blocks) {
    const auto bytes = static_cast<std::int64_t>(block.size_bytes);
    live_change[block.first_begin] += bytes;
    live_change[block.first_end] -= bytes;
    if (block.second_end > 0) {  // wraps: also live from the step's start
      live_change[0] += bytes;
      live_change[block.second_end] -= bytes;
    }
  }
  return live_change;
}

step_start set_step_start(std::vector<step_block>& blocks, std::size_t phases) {
  if (phases == 0) return {};
  const std::vector<std::int64_t> live_change = step_live_changes(blocks, phases);
  std::int64_t live = 0, peak = 0, least = INT64_MAX;
  std::size_t start_phase = 0;
  for (std::size_t phase = 0; phase < phases; ++phase) {
    live += live_change[phase];
    peak = std::max(peak, live);
    if (live < least) {
      least = live;
      start_phase = phase + 1 == phases ? 0 : phase + 1;
    }
  }
  for (step_block& block : blocks) block.from_start = (block.first_begin + phases - start_phase) % phases;
  return {start_phase, static_cast<std::size_t>(peak)};
}

std::size_t step_peak_bytes(const std::vector<step_block>& blocks) {
  std::size_t phases = 0;
  for (const step_block& block : blocks) phases = std::max(phases, block.first_end);
  std::int64_t live = 0, peak = 0;
  for (const std::int64_t change : step_live_changes(blocks, phases)) {
    live += change;
    peak = std::max(peak, live);
  }
  return static_cast<std::size_t>(peak);
}

// Note [Layout refinement]
// A greedy layout is as good as its placing sequence, and the blocks that end above the
// step's peak are those it placed too late: the space they needed was taken by blocks
// placed before them. So the layout is made again with those blocks moved to the front of
// the sequence (in their order, the others keeping theirs), and again from that layout,
// keeping the narrowest seen: a bounded search over sequences guided by where each layout
// went wrong (the "squeaky wheel" of scheduling heuristics). It stops at the peak, which
// no layout beats, and where the sequence would not change. Each pass is one greedy
// layout, blocks^2 lifetime tests, so a step gets kRefinePasses passes while they stay
// within kRefineLifetimeTests (16 passes up to 707 blocks, 8 at 1,000, 2 at 2,000, none
// from 2,829: the large training steps, whose size orders lay out within a fraction of a
// percent of their peak). A step small enough to be laid out on the allocating thread
// (kLayoutThreadBlocks) spends the program's time on it, so it stops after
// kSmallStepStalledPasses passes in a row that narrow nothing; a larger one is refined on
// its layout thread while the loop goes on. Measured over the 123 first layouts of corpus
// seeds 101-115 of every family (a debug dump, not committed): 1.0202x the step's peak ->
// 1.0152x geomean, narrower on 27, never wider -- serving and many-stream steps by a few
// percent (kv-cache-eviction 1.050x -> 1.019x, many-streams 1.058x -> 1.024x), nine
// quantized-attention steps from up to 9 % above their peak to the peak; the steps under
// kLayoutThreadBlocks 1.0221x -> 1.0144x for 1.6x their layout time (1.0130x for 2.2x
// without the stall rule), all 123 for 1.9x. The widest steps, of the corpus' worst seeds,
// stay wide: a many-stream step 1.202x -> 1.139x, a serving step 1.195x unchanged.
std::size_t refine_layout(std::vector<step_block>& blocks, std::vector<std::size_t> sequence, std::size_t span_bytes,
                          const std::atomic<bool>* cancel) {
  constexpr std::size_t kRefinePasses = 16;
  constexpr double kRefineLifetimeTests = 8e6;
  constexpr std::size_t kSmallStepStalledPasses = 4;
  if (blocks.empty() || span_bytes == 0) return span_bytes;
  const std::size_t peak_bytes = step_peak_bytes(blocks);
  const double tests_per_pass = static_cast<double>(blocks.size()) * static_cast<double>(blocks.size());
  const auto passes = static_cast<std::size_t>(std::min(static_cast<double>(kRefinePasses), kRefineLifetimeTests / tests_per_pass));
  const std::size_t stalled_limit = blocks.size() < kLayoutThreadBlocks ? kSmallStepStalledPasses : passes;
  std::vector<step_block> trial = blocks;
  std::size_t stalled = 0;  // passes since the last narrower layout
  for (std::size_t pass = 0; pass < passes && span_bytes > peak_bytes && stalled < stalled_limit; ++pass) {
    const auto ends_above_peak = [&](std::size_t index) {
      return trial[index].offset_bytes + trial[index].size_bytes > peak_bytes;
    };
    // Those blocks already lead the sequence: it would be laid out the same again.
    if (std::is_partitioned(sequence.begin(), sequence.end(), ends_above_peak)) break;
    std::stable_partition(sequence.begin(), sequence.end(), ends_above_peak);
    const std::size_t trial_span = lay_out_in(trial, sequence, cancel);
    if (trial_span == 0) return 0;  // cancelled
    if (trial_span < span_bytes) {
      span_bytes = trial_span;
      blocks = trial;
      stalled = 0;
    } else {
      ++stalled;
    }
  }
  return span_bytes;
}

}  // namespace fragless::core
