// Stream affinity: blocks moved within a settled step layout so that the places a loop
// reuses pass from a block to one of its own stream (Note [Stream affinity]).
// Invariant: as stream_affinity.hpp: every move goes to a place inside the span where no
// block whose lifetime meets the moved one's lies, so the layout stays valid and as wide.
#include "core/stream_affinity.hpp"

#include "core/lifetime_columns.hpp"
#include "core/offset_order.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <utility>

namespace fragless::core {

// Note [Stream affinity]
// A loop plan's block reuses the bytes of the blocks that held its place in the step
// before (Note [Streams per piece] in vmm_pool_plans.cpp). Where those were made on
// another stream, the new block's stream must wait for theirs (Note [Stream reuse]): an
// event recorded and a wait queued, about 200 ns each on an H100, every step, for as long
// as the loop runs -- on a many-stream loop more than a quarter of its steady allocator
// time. The layout orders place blocks by size and lifetime alone, so a place passes
// between streams about as often as the streams take turns. The rule: once the span is
// settled, each block moves to the place within the span, free over its lifetime, that
// gives it the fewest neighbours of other streams -- the blocks that hold one of its
// bytes last before it is made, and first after it is freed -- and stays where no place
// has fewer. The candidate places are the edges of the gaps its lifetime leaves free and
// the places of the blocks of its own stream nearest to it in time (their start, or their
// end less its size), so that a block can take over where its own stream left. Largest
// blocks first, two rounds at most, a round with no move ending it. The span, and so
// reserved memory, never changes; only which bytes each block holds does.
// Steady-pass event calls (records and waits, simcuda's counts, five repetitions,
// loop_plan_stream_affinity off -> on): corpus many-streams seed 1 (ten streams) 1,577 ->
// 739, pipeline-1f1b seed 1 120 -> 0, sharded-data-parallel seed 1 346 -> 10;
// docs/compaction.md ("Kept: stream affinity") has the corpus figures. The stage is
// about blocks^2 work (two rounds take 28 ms on that many-streams step of 1,069 blocks,
// whose layout takes 10 ms; 41 ms before a place's count stopped where it could no longer
// win and the nearest block holding a whole place was found without a heap -- the same
// moves): a step of more than kStreamAffinityMaxBlocks keeps its layout as the earlier
// stages left it.

// Note [Affinity scan]
// Each block the search tries to move first sorts out every other block: those whose
// lifetimes meet its own (the places it may not take) and, of the others, the
// kOwnStreamCandidates of its own stream nearest in time. That was a lifetime test and a
// branch per block, and a partial sort of all its stream's blocks that miss it -- more
// than a third of the layout time of a step of two streams (perf over `fragless-bench
// layout --families two-loops`, the stage about half of it). Now the lifetimes are kept as
// columns, tested 64 at a time (Note [Lifetime columns]), each stream's blocks are a row of
// bits, so its blocks that miss the moved one are a mask, and the nearest are kept eight
// at a time as they are found. The blocks it meets are wanted in address order: every
// block is kept in one list by (offset, end, index), updated as a block moves
// (offset_order.hpp, as in the layout repair), and walked for those whose bit is set
// where sorting them would cost more (count x log2 of it at least the blocks' count). The same blocks in the same order come out, so the same
// moves: `fragless-bench layout --seeds 30 --families
// two-loops,many-streams,pipeline-1f1b,sharded-data-parallel` (one thread, the library
// before and after, three alternated runs), every offset the same, layout CPU time per
// family 0.86x, 0.93x, 0.89x and 0.90x. What is left of the stage is mostly the counting
// of each candidate place's neighbours (cost_at and foreign_nearest's heap).

namespace {

constexpr std::size_t kRounds = 2;
constexpr std::size_t kOwnStreamCandidates = 8;  // nearest blocks of the block's stream

struct step_view {
  const std::vector<step_block>& blocks;
  std::size_t phases;
  std::vector<std::size_t> free_phase;  // modulo phases

  step_view(const std::vector<step_block>& step, std::size_t step_phases) : blocks(step), phases(step_phases) {
    free_phase.reserve(step.size());
    for (const step_block& block : step)
      free_phase.push_back((block.second_end > 0 ? block.second_end : block.first_end) % step_phases);
  }
  bool meet(std::size_t a, std::size_t b) const noexcept {
    const step_block& x = blocks[a];
    const step_block& y = blocks[b];
    return lifetimes_meet(static_cast<std::uint32_t>(x.first_begin), static_cast<std::uint32_t>(x.first_end),
                          static_cast<std::uint32_t>(x.second_end), static_cast<std::uint32_t>(y.first_begin),
                          static_cast<std::uint32_t>(y.first_end), static_cast<std::uint32_t>(y.second_end));
  }
  // Phases from `earlier`'s free to `later`'s allocation, the step repeating.
  std::size_t gap_phases(std::size_t earlier, std::size_t later) const noexcept {
    const std::size_t gap = blocks[later].first_begin + phases - free_phase[earlier];  // below 2 * phases
    return gap >= phases ? gap - phases : gap;
  }
};

// Of `by_distance` (blocks whose lifetimes miss the block's, each with its distance in
// time), how many of another stream hold a byte of [begin, end) nearest in time: each is
// counted once, and the count stops at `limit`. Taken nearest first (a heap, so that the
// far ones, once every byte is claimed, are never ordered); ties go to the lower index.
// `covered` is scratch.
std::size_t foreign_nearest(const std::vector<step_block>& blocks, std::uint32_t stream,
                            std::vector<std::pair<std::size_t, std::size_t>>& by_distance, std::size_t begin,
                            std::size_t end, std::vector<std::pair<std::size_t, std::size_t>>& covered,
                            std::size_t limit = SIZE_MAX) {
  if (by_distance.empty()) return 0;
  // Most often the nearest block alone holds every byte: one pass finds it, and no heap is
  // built (the heap's first pop would take the same block).
  const auto nearest = std::min_element(by_distance.begin(), by_distance.end());
  const step_block& nearest_block = blocks[nearest->second];
  if (nearest_block.offset_bytes <= begin && nearest_block.offset_bytes + nearest_block.size_bytes >= end)
    return nearest_block.stream_index != stream ? 1 : 0;
  const auto farther = [](const auto& x, const auto& y) { return x > y; };
  std::make_heap(by_distance.begin(), by_distance.end(), farther);
  covered.clear();  // disjoint, sorted intervals already claimed by nearer blocks
  std::size_t foreign = 0;
  for (auto heap_end = by_distance.end(); heap_end != by_distance.begin(); --heap_end) {
    std::pop_heap(by_distance.begin(), heap_end, farther);
    const step_block& other = blocks[std::prev(heap_end)->second];
    const std::size_t lo = std::max(begin, other.offset_bytes);
    const std::size_t hi = std::min(end, other.offset_bytes + other.size_bytes);
    // Is [lo, hi) wholly claimed already?
    auto at = std::upper_bound(covered.begin(), covered.end(), std::make_pair(lo, SIZE_MAX));
    if (at != covered.begin() && std::prev(at)->second >= hi) continue;
    if (other.stream_index != stream && ++foreign >= limit) break;
    // Claim [lo, hi): merge with the intervals it touches.
    std::size_t new_lo = lo, new_hi = hi;
    auto first = at;
    if (first != covered.begin() && std::prev(first)->second >= lo) --first;
    auto last = first;
    while (last != covered.end() && last->first <= new_hi) {
      new_lo = std::min(new_lo, last->first);
      new_hi = std::max(new_hi, last->second);
      ++last;
    }
    first = covered.erase(first, last);
    covered.insert(first, {new_lo, new_hi});
    if (covered.size() == 1 && covered.front().first <= begin && covered.front().second >= end) break;  // all claimed
  }
  return foreign;
}

// The search over one layout. The blocks under a place are found by size tier (a power
// of two of size each): a tier's blocks are kept in address order, and a scan goes back
// from the place's end only while a block of the tier that starts there could still
// reach the place.
class affinity_search {
 public:
  affinity_search(std::vector<step_block>& blocks, std::size_t phases, std::size_t span_bytes)
      : blocks_(blocks), view_(blocks, phases), span_bytes_(span_bytes), lifetimes_(blocks.size()),
        words_((blocks.size() + 63) / 64) {
    // Note [Affinity scan]: every lifetime as columns, and each stream's blocks as bits.
    std::size_t streams = 0;
    for (const step_block& block : blocks) {
      lifetimes_.push_back(static_cast<std::uint32_t>(block.first_begin), static_cast<std::uint32_t>(block.first_end),
                           static_cast<std::uint32_t>(block.second_end));
      streams = std::max<std::size_t>(streams, block.stream_index + std::size_t{1});
    }
    stream_bits_.assign(streams * words_, 0);
    for (std::size_t index = 0; index < blocks.size(); ++index)
      stream_bits_[blocks[index].stream_index * words_ + index / 64] |= std::uint64_t{1} << (index % 64);
    meeting_row_.assign(words_, 0);
    by_offset_.resize(blocks.size());
    for (std::size_t index = 0; index < blocks.size(); ++index) by_offset_[index] = static_cast<std::uint32_t>(index);
    std::sort(by_offset_.begin(), by_offset_.end(), [this](std::uint32_t a, std::uint32_t b) { return lies_below(a, b); });
    for (std::size_t index = 0; index < blocks.size(); ++index)
      tiers_[tier_of(index)].push_back(placed{blocks[index].offset_bytes, blocks[index].offset_bytes + blocks[index].size_bytes, index});
    for (std::size_t tier_index = 0; tier_index < kTiers; ++tier_index) {
      std::vector<placed>& tier = tiers_[tier_index];
      if (tier.empty()) continue;
      std::sort(tier.begin(), tier.end());
      used_tiers_.push_back(tier_index);
    }
  }

  // One block: the place with the fewest foreign neighbours, if fewer than where it is.
  bool improve(std::size_t index) {
    const step_block& block = blocks_[index];
    const std::size_t here = cost_at(index, block.offset_bytes, SIZE_MAX);
    if (here == 0) return false;
    // The places its lifetime leaves free, and its own stream's blocks that it does not
    // meet, nearest in time first (Note [Affinity scan]).
    occupied_.clear();
    own_.clear();
    const auto first_begin = static_cast<std::uint32_t>(block.first_begin),
               first_end = static_cast<std::uint32_t>(block.first_end),
               second_end = static_cast<std::uint32_t>(block.second_end);
    const std::uint64_t* own_stream = &stream_bits_[block.stream_index * words_];
    std::size_t meeting_count = 0;
    for (std::size_t word = 0; word < words_; ++word) {
      std::uint64_t meeting = lifetimes_.meeting_bits(word, first_begin, first_end, second_end);
      std::uint64_t own = own_stream[word] & ~meeting;
      if (word == index / 64) {  // not itself
        meeting &= ~(std::uint64_t{1} << (index % 64));
        own &= ~(std::uint64_t{1} << (index % 64));
      }
      meeting_row_[word] = meeting;
      meeting_count += static_cast<std::size_t>(std::popcount(meeting));
      for (; own != 0; own &= own - 1) {
        const std::size_t other = word * 64 + static_cast<std::size_t>(std::countr_zero(own));
        keep_nearest({std::min(view_.gap_phases(other, index), view_.gap_phases(index, other)), other});
      }
    }
    // In address order: by a walk of every block where sorting them would cost more.
    if (!walk_beats_sort(meeting_count, blocks_.size())) {
      for (std::size_t word = 0; word < words_; ++word)
        for (std::uint64_t meeting = meeting_row_[word]; meeting != 0; meeting &= meeting - 1) {
          const step_block& each = blocks_[word * 64 + static_cast<std::size_t>(std::countr_zero(meeting))];
          occupied_.emplace_back(each.offset_bytes, each.offset_bytes + each.size_bytes);
        }
      std::sort(occupied_.begin(), occupied_.end());
    } else {
      for (const std::uint32_t other : by_offset_)
        if ((meeting_row_[other / 64] >> (other % 64)) & 1)
          occupied_.emplace_back(blocks_[other].offset_bytes, blocks_[other].offset_bytes + blocks_[other].size_bytes);
    }
    std::size_t best_cost = here, best_offset = block.offset_bytes;
    auto consider = [&](std::size_t offset) {
      if (offset == block.offset_bytes) return;
      // A place wins with fewer foreign neighbours than the best so far, or as few at a lower
      // address once that best beats the block's own place: its count stops where it cannot
      // win, and a place that cannot win (none has fewer than zero) is not counted at all.
      const bool ties_win = best_cost < here && offset < best_offset;
      const std::size_t limit = ties_win ? best_cost + 1 : best_cost;
      if (limit == 0) return;
      const std::size_t cost = cost_at(index, offset, limit);
      if (cost < best_cost || (cost == best_cost && ties_win)) {
        best_cost = cost;
        best_offset = offset;
      }
    };
    auto gap = [&](std::size_t begin, std::size_t end) {
      if (end - begin < block.size_bytes) return;
      consider(begin);
      consider(end - block.size_bytes);
      for (const auto& [distance, other] : own_) {
        const step_block& each = blocks_[other];
        const std::size_t aligned_end = each.offset_bytes + each.size_bytes;
        if (each.offset_bytes >= begin && each.offset_bytes + block.size_bytes <= end) consider(each.offset_bytes);
        if (aligned_end >= begin + block.size_bytes && aligned_end <= end) consider(aligned_end - block.size_bytes);
      }
    };
    std::size_t gap_begin = 0;
    for (const auto& [begin, end] : occupied_) {
      if (begin > gap_begin) gap(gap_begin, begin);
      gap_begin = std::max(gap_begin, end);
    }
    if (gap_begin < span_bytes_) gap(gap_begin, span_bytes_);
    if (best_offset == block.offset_bytes) return false;
    std::vector<placed>& tier = tiers_[tier_of(index)];
    tier.erase(std::lower_bound(tier.begin(), tier.end(), placed{block.offset_bytes, block.offset_bytes + block.size_bytes, index}));
    const auto below = [this](std::uint32_t a, std::uint32_t b) { return lies_below(a, b); };
    reorder_after(by_offset_, static_cast<std::uint32_t>(index), below, [&] { blocks_[index].offset_bytes = best_offset; });
    const placed moved{best_offset, best_offset + blocks_[index].size_bytes, index};
    tier.insert(std::lower_bound(tier.begin(), tier.end(), moved), moved);
    return true;
  }

 private:
  static constexpr std::size_t kTiers = 65;

  // Note [Affinity scan]: the order of by_offset_ -- (offset, end, index).
  bool lies_below(std::uint32_t a, std::uint32_t b) const noexcept {
    const step_block &x = blocks_[a], &y = blocks_[b];
    if (x.offset_bytes != y.offset_bytes) return x.offset_bytes < y.offset_bytes;
    if (x.size_bytes != y.size_bytes) return x.size_bytes < y.size_bytes;
    return a < b;
  }

  // Note [Affinity scan]: own_ keeps the kOwnStreamCandidates smallest (distance, index)
  // offered, in order.
  void keep_nearest(std::pair<std::size_t, std::size_t> candidate) {
    if (own_.size() == kOwnStreamCandidates) {
      if (!(candidate < own_.back())) return;
      own_.pop_back();
    }
    own_.insert(std::upper_bound(own_.begin(), own_.end(), candidate), candidate);
  }

  std::size_t tier_of(std::size_t index) const noexcept {
    return static_cast<std::size_t>(std::bit_width(blocks_[index].size_bytes));  // sizes in [2^(t-1), 2^t)
  }
  // A block's place in its tier's address order.
  struct placed {
    std::size_t offset_bytes, end_bytes, index;
    bool operator<(const placed& other) const noexcept {
      return offset_bytes < other.offset_bytes || (offset_bytes == other.offset_bytes && index < other.index);
    }
  };

  // Foreign neighbours of block `index` placed at `offset`: nearest before it and after it,
  // counted up to `limit`. Every block under a place the search looks at misses the
  // block's lifetime.
  std::size_t cost_at(std::size_t index, std::size_t offset, std::size_t limit) {
    const step_block& block = blocks_[index];
    const std::size_t end = offset + block.size_bytes;
    under_.clear();
    for (std::size_t tier_index : used_tiers_) {
      const std::vector<placed>& tier = tiers_[tier_index];
      const std::size_t reach_bytes = tier_index >= 64 ? SIZE_MAX : (std::size_t{1} << tier_index) - 1;  // largest size
      auto at = std::lower_bound(tier.begin(), tier.end(), end,
                                 [](const placed& x, std::size_t bound) { return x.offset_bytes < bound; });
      while (at != tier.begin()) {
        --at;
        if (at->offset_bytes + std::min(reach_bytes, SIZE_MAX - at->offset_bytes) <= offset) break;
        if (at->index != index && at->end_bytes > offset) under_.push_back(at->index);
      }
    }
    nearest_.clear();
    for (std::size_t other : under_) nearest_.emplace_back(view_.gap_phases(other, index), other);
    const std::size_t before = foreign_nearest(blocks_, block.stream_index, nearest_, offset, end, covered_, limit);
    if (before >= limit) return before;
    nearest_.clear();
    for (std::size_t other : under_) nearest_.emplace_back(view_.gap_phases(index, other), other);
    return before + foreign_nearest(blocks_, block.stream_index, nearest_, offset, end, covered_, limit - before);
  }

  std::vector<step_block>& blocks_;
  step_view view_;
  std::size_t span_bytes_;
  std::vector<placed> tiers_[kTiers];  // blocks by size tier, each in address order
  std::vector<std::size_t> used_tiers_, under_;
  lifetime_columns lifetimes_;              // every block's, by index
  std::size_t words_;                       // 64-block words in a row of bits
  std::vector<std::uint64_t> stream_bits_;  // by stream, the blocks it makes: words_ words each
  std::vector<std::uint64_t> meeting_row_;  // the blocks the one being moved meets
  std::vector<std::uint32_t> by_offset_;    // every block by (offset, end, index)
  std::vector<std::pair<std::size_t, std::size_t>> occupied_, own_, nearest_, covered_;
};

bool one_stream(const std::vector<step_block>& blocks) noexcept {
  for (const step_block& block : blocks)
    if (block.stream_index != blocks.front().stream_index) return false;
  return true;
}

}  // namespace

std::size_t settle_stream_affinity(std::vector<step_block>& blocks, std::size_t phases, std::size_t span_bytes,
                                   const std::atomic<bool>* cancel) {
  if (blocks.size() < 2 || blocks.size() > kStreamAffinityMaxBlocks || phases == 0 || one_stream(blocks)) return 0;
  std::vector<std::size_t> order(blocks.size());
  for (std::size_t index = 0; index < order.size(); ++index) order[index] = index;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return blocks[a].size_bytes > blocks[b].size_bytes; });
  affinity_search search(blocks, phases, span_bytes);
  std::size_t moves = 0;
  for (std::size_t round = 0; round < kRounds; ++round) {
    std::size_t moved = 0;
    for (std::size_t index : order) {
      if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) return moves;
      if (search.improve(index)) ++moved;
    }
    moves += moved;
    if (moved == 0) break;
  }
  return moves;
}

std::size_t cross_stream_neighbours(const std::vector<step_block>& blocks, std::size_t phases) {
  if (phases == 0) return 0;
  const step_view view(blocks, phases);
  std::vector<std::pair<std::size_t, std::size_t>> before, covered;
  std::size_t total = 0;
  for (std::size_t index = 0; index < blocks.size(); ++index) {
    const step_block& block = blocks[index];
    before.clear();
    for (std::size_t other = 0; other < blocks.size(); ++other) {
      if (other == index || view.meet(index, other)) continue;
      const step_block& each = blocks[other];
      if (each.offset_bytes >= block.offset_bytes + block.size_bytes ||
          each.offset_bytes + each.size_bytes <= block.offset_bytes)
        continue;
      before.emplace_back(view.gap_phases(other, index), other);
    }
    total += foreign_nearest(blocks, block.stream_index, before, block.offset_bytes,
                             block.offset_bytes + block.size_bytes, covered);
  }
  return total;
}

}  // namespace fragless::core
