// Stream affinity: blocks moved within a settled step layout so that the places a loop
// reuses pass from a block to one of its own stream (Note [Stream affinity]).
// Invariant: as stream_affinity.hpp: every move goes to a place inside the span where no
// block whose lifetime meets the moved one's lies, so the layout stays valid and as wide.
#include "core/stream_affinity.hpp"

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
      : blocks_(blocks), view_(blocks, phases), span_bytes_(span_bytes) {
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
    // meet, nearest in time first.
    occupied_.clear();
    own_.clear();
    for (std::size_t other = 0; other < blocks_.size(); ++other) {
      if (other == index) continue;
      const step_block& each = blocks_[other];
      if (view_.meet(index, other))
        occupied_.emplace_back(each.offset_bytes, each.offset_bytes + each.size_bytes);
      else if (each.stream_index == block.stream_index)
        own_.emplace_back(std::min(view_.gap_phases(other, index), view_.gap_phases(index, other)), other);
    }
    std::sort(occupied_.begin(), occupied_.end());
    const std::size_t own_count = std::min(own_.size(), kOwnStreamCandidates);
    std::partial_sort(own_.begin(), own_.begin() + static_cast<std::ptrdiff_t>(own_count), own_.end());
    own_.resize(own_count);
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
    blocks_[index].offset_bytes = best_offset;
    const placed moved{best_offset, best_offset + blocks_[index].size_bytes, index};
    tier.insert(std::lower_bound(tier.begin(), tier.end(), moved), moved);
    return true;
  }

 private:
  static constexpr std::size_t kTiers = 65;

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
