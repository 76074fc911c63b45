// Ring layout (Note [Ring layout]): the step's blocks placed in its order, next fit in a
// ring of fixed width, at the narrowest of a few widths above the step's peak -- every block
// at the ring's cursor, then the shorter-lived half off it -- each layout found settled,
// each block down to the lowest place it fits, and the narrower kept.
#include "core/ring_layout.hpp"

#include "core/lifetime_columns.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <utility>

namespace fragless::core {
namespace {

// Note [Ring layout]
// The greedy orders put each block in the smallest gap it fits (Note [Layout orders]), and
// the skyline search on the lowest floor (Note [Skyline layout]): both fill the bottom
// first. Memory that is freed roughly in the order it was made -- caches that grow the
// eager way (a longer copy made, then the old one freed), requests that leave oldest
// first, a queue -- is packed best the way a ring buffer packs it: each block just after
// the one made before it, and at the top of a fixed width back to the bottom, where the
// oldest blocks have gone by then. The bottom-first layouts instead put a new copy in
// whatever hole the last frees left, which the next, larger copy cannot use, and the
// step's span climbs above its peak (1.08-1.14x on serving steps of growing caches,
// forward and backwards, Note [Time reversal]).
// So where a step is still wider than its peak after every other stage, its blocks are
// placed in the order the step makes them, counted from where placing starts (the
// `from_start` of Note [Layout orders]), each at the first place at or above the end of
// the block placed before it that misses every placed block whose lifetime meets its own
// and ends under the width, else the first such place from the bottom; a block that fits
// nowhere fails the width. The widths tried are the step's peak and then steps of
// 1/kRingWidthSteps of it above, narrowest first, below the span already had; the first
// that takes every block is kept, since no wider one is tried. Each trial is the blocks
// times the blocks they may meet in lifetime tests; a block whose lifetime ended, counted
// from where placing starts, before the block being placed began is not tested again
// unless the block being placed wraps past the step's end back to it. Trials stop after
// kRingPairTests tests in all, so a large step that is far above its peak is tried at
// fewer widths. Serial and its choices fixed: the same blocks give the same layout.
// Measured on the first layouts of corpus seeds 1-20 of every family and 15 more
// `kv-cache-eviction` seeds (227 steps, a debug dump, not committed): 1.0115x the step's
// peak -> 1.0095x, geometric mean; only serving steps of growing caches change, 16 of 32
// narrower, 1.056x -> 1.041x (seed 549 1.137x -> 1.063x, seed 722's 3,704 blocks 1.124x
// -> 1.062x for 10-30 % more layout time); the rest are at their peak or no narrower.
// Where blocks are a tenth of the peak each and few live at once (seed 196, 1.125x) no
// width near the peak takes them: a block then fits neither above the cursor nor below.
// Nor does a ring work where scratch blocks come and go between the ones that queue: each
// is placed at the cursor like the rest and moves it past room the next queued block would
// have used, and a large one sends it round the ring early. So the ring is tried a second
// time, unless the first reached the peak, with the shorter-lived half of the step's blocks
// (those living fewer phases than the median) off the cursor: each at the highest place
// under the width that fits, out of the queue's way, the cursor left where it was; the
// narrower of the two is kept. Measured with `fragless-bench layout` (every pass of 1,000
// `kv-cache-eviction` seeds as one step, the 383 laid out wider than 1.01x their peak):
// above 1.03x their peak 223 -> 194, geometric mean 1.0391x -> 1.0347x, 124 narrower
// (with Note [Canonical turns], 2 wider there); the line at half the median lifetime 193,
// a quarter of it 197, 1.5 times it 216; the short-lived placed lowest rather than highest,
// 202. No many-stream step changed. It is tried on steps of at most kShortLivedRingBlocks
// blocks, and from what the first ring left of the budget: on the largest steps it cost
// layout time for almost nothing (that pass of seed 46 below: 0.58 -> 1.7 s with the old
// settling, for 0.06 %).
// The ring leaves holes -- a block that did not fit before the top left the rest of the
// width empty that lap -- so the layout it finds is then settled: each block, lowest
// first, moved down to the lowest place that misses every block its lifetime meets, sweep
// after sweep (at most kSettleSweeps) until none moves, within the same test budget; no
// block moves up, so the span never grows. The 32 serving steps above: 1.041x -> 1.039x
// (seed 6 1.086x -> 1.079x, seed 196 1.125x -> 1.119x) for about a fifth more layout
// time; corpus `kv-cache-eviction`, 1,000 seeds, fragless alone: 9 seeds lower by more
// than 1 %, none higher; the family's longest call (a plan waiting for its layout, Note
// [Layout threads]) 4.1-4.3 -> 4.4-4.7 ms over seeds 1-200 (three alternated runs each).
// Settling walks the blocks in offset order with their lifetimes as columns (Note
// [Lifetime columns]) rather than testing every pair and sorting each block's list, with
// the same moves: one sweep of a whole-pass step of 11,077 blocks (corpus `rlhf-ppo` seed
// 46, laid out on the allocating thread) took 0.7 s that way. A trial also counts the
// sorting of each block's list against its budget, not only the lifetime tests.
constexpr std::size_t kRingWidthSteps = 256;
constexpr std::size_t kRingPairTests = std::size_t{200} << 20;
constexpr std::size_t kSettleSweeps = 8;
// The shorter-lived half off the cursor is tried on steps of at most this many blocks: the
// skyline search's limit (Note [Skyline layout]), above which steps are training and
// whole-pass steps, laid out within a fraction of a percent of their peak and often on
// the allocating thread, where the second ring cost 0.1-0.5 s for a pass of 11,000-19,000
// blocks and narrowed 3 of the 14,000 corpus passes, by at most 0.3 %.
constexpr std::size_t kShortLivedRingBlocks = 5656;

// The lowest gap for `size_bytes` at or above `from_bytes`, among taken ranges offered in
// start order: each range offered pushes the gap above it where the gap cannot hold the
// size below it; offer() is false once the gap is found (no later range can move it).
class lowest_gap {
public:
  lowest_gap(std::size_t from_bytes, std::size_t size_bytes) noexcept : gap_begin_(from_bytes), size_bytes_(size_bytes) {}
  bool offer(std::size_t taken_begin, std::size_t taken_end) noexcept {
    if (taken_end <= gap_begin_) return true;
    if (taken_begin >= gap_begin_ && taken_begin - gap_begin_ >= size_bytes_) return false;
    gap_begin_ = taken_end;
    return true;
  }
  std::size_t offset_bytes() const noexcept { return gap_begin_; }

private:
  std::size_t gap_begin_, size_bytes_;
};

// The lowest offset at or above `from_bytes` where `size_bytes` misses every range of
// `taken` (sorted by start).
std::size_t first_fit_from(const std::vector<std::pair<std::size_t, std::size_t>>& taken, std::size_t from_bytes,
                           std::size_t size_bytes) {
  lowest_gap gap(from_bytes, size_bytes);
  for (const auto& [taken_begin, taken_end] : taken)
    if (!gap.offer(taken_begin, taken_end)) break;
  return gap.offset_bytes();
}

// Note [Ring order]
// A trial gathers, for each block, the ranges of the placed blocks its lifetime meets, and
// looks for its place among them in address order. Those ranges were sorted for each block:
// on the largest whole-pass steps (corpus rlhf-ppo seed 842, 19,243 blocks, laid out on
// the allocating thread) the sort was an eighth of the layout. The blocks whose lifetime has
// not ended -- the only ones a block that does not wrap past the step's end can meet -- are
// now kept in (offset, end) order as they are placed, so their ranges come out sorted; a
// wrapping block, which meets any placed block, still sorts its list. The sort's work is
// still counted against the trial's budget, so every trial stops where it stopped, and
// every place is the one the sort gave (ranges equal in offset and end are the same range).
struct ring_block {
  std::size_t offset_bytes, end_bytes;
  std::uint32_t first_begin, first_end, second_end;
  std::size_t end_from_start;  // the end of its lifetime, counted from where placing starts
};

// Note [Ring layout]: which blocks follow the cursor.
enum class ring_variant {
  every_block,          // every block at the cursor
  short_lived_on_top,   // the shorter-lived half at the highest place that fits, off the cursor
};
inline constexpr ring_variant kRingVariants[] = {ring_variant::every_block, ring_variant::short_lived_on_top};

class ring_trial {
public:
  ring_trial(const std::vector<step_block>& blocks, const std::vector<std::size_t>& sequence, std::size_t phases,
             ring_variant variant)
      : blocks_(blocks), sequence_(sequence), phases_(phases) {
    placed_.reserve(blocks.size());
    offsets_.resize(blocks.size());
    if (variant == ring_variant::short_lived_on_top && !blocks.empty()) {
      // The median lifetime: blocks living shorter are the shorter-lived half.
      std::vector<std::size_t> lifetimes;
      lifetimes.reserve(blocks.size());
      for (const step_block& block : blocks) lifetimes.push_back(block.lifetime());
      std::nth_element(lifetimes.begin(), lifetimes.begin() + lifetimes.size() / 2, lifetimes.end());
      short_lifetime_below_ = lifetimes[lifetimes.size() / 2];
    }
  }

  // Places every block under `width_bytes`; false when one fits nowhere or `pair_budget`
  // lifetime tests ran out (counted down either way). offsets() then holds the layout.
  bool fit(std::size_t width_bytes, std::size_t& pair_budget) {
    placed_.clear();
    active_.clear();
    std::size_t cursor_bytes = 0;
    for (std::size_t index : sequence_) {
      const step_block& block = blocks_[index];
      const std::uint32_t begin = static_cast<std::uint32_t>(block.first_begin);
      const std::uint32_t end = static_cast<std::uint32_t>(block.first_end);
      const std::uint32_t second_end = static_cast<std::uint32_t>(block.second_end);
      const std::size_t end_from_start = block.from_start + block.lifetime();
      // Blocks that ended before this one began meet none placed from here on but the
      // ones that wrap past the step's end.
      std::erase_if(active_, [&](std::size_t placed) { return placed_[placed].end_from_start <= block.from_start; });
      const bool wraps = end_from_start > phases_;
      if (!spend(wraps ? placed_.size() : active_.size(), pair_budget)) return false;
      taken_.clear();
      const auto test = [&](const ring_block& other) {
        if (lifetimes_meet(other.first_begin, other.first_end, other.second_end, begin, end, second_end))
          taken_.emplace_back(other.offset_bytes, other.end_bytes);
      };
      if (wraps) {
        for (const ring_block& other : placed_) test(other);
      } else {
        for (std::size_t placed : active_) test(placed_[placed]);
      }
      // Sorting is work too: a large step's blocks meet thousands of others. Counted as it
      // always was, though only a wrapping block's list needs it (Note [Ring order]).
      if (!spend(taken_.size() * static_cast<std::size_t>(std::bit_width(taken_.size())), pair_budget)) return false;
      if (wraps) std::sort(taken_.begin(), taken_.end());
      const bool off_the_cursor = block.lifetime() < short_lifetime_below_;
      std::size_t offset_bytes = SIZE_MAX;
      if (off_the_cursor) {
        offset_bytes = highest_fit_under(block.size_bytes, width_bytes);
      } else {
        offset_bytes = fit_under(cursor_bytes, block.size_bytes, width_bytes);
        if (offset_bytes == SIZE_MAX) offset_bytes = fit_under(0, block.size_bytes, width_bytes);
      }
      if (offset_bytes == SIZE_MAX) return false;
      offsets_[index] = offset_bytes;
      if (!off_the_cursor) cursor_bytes = offset_bytes + block.size_bytes;
      placed_.push_back({offset_bytes, offset_bytes + block.size_bytes, begin, end, second_end, end_from_start});
      // Note [Ring order]: after every active block not above it.
      const auto above = std::upper_bound(active_.begin(), active_.end(), placed_.size() - 1,
                                          [this](std::size_t a, std::size_t b) { return lies_below(a, b); });
      active_.insert(above, placed_.size() - 1);
    }
    return true;
  }

  const std::vector<std::size_t>& offsets() const noexcept { return offsets_; }

private:
  // Note [Ring order]: the order of active_ -- (offset, end) of the placed blocks.
  bool lies_below(std::size_t a, std::size_t b) const noexcept {
    return placed_[a].offset_bytes != placed_[b].offset_bytes ? placed_[a].offset_bytes < placed_[b].offset_bytes
                                                              : placed_[a].end_bytes < placed_[b].end_bytes;
  }

  // Takes `work` lifetime tests (or their equal) from the budget; false, and the budget
  // emptied, where it has not that many left.
  static bool spend(std::size_t work, std::size_t& pair_budget) noexcept {
    if (work > pair_budget) {
      pair_budget = 0;
      return false;
    }
    pair_budget -= work;
    return true;
  }

  // The highest offset where `size_bytes` misses every taken range and ends at or under
  // `width_bytes`; SIZE_MAX where there is none.
  std::size_t highest_fit_under(std::size_t size_bytes, std::size_t width_bytes) const {
    std::size_t highest = SIZE_MAX, covered_bytes = 0;
    for (const auto& [taken_begin, taken_end] : taken_) {
      if (taken_begin > covered_bytes) {
        const std::size_t gap_end = std::min(taken_begin, width_bytes);
        if (gap_end >= covered_bytes && gap_end - covered_bytes >= size_bytes) highest = gap_end - size_bytes;
      }
      covered_bytes = std::max(covered_bytes, taken_end);
    }
    if (width_bytes >= covered_bytes && width_bytes - covered_bytes >= size_bytes) highest = width_bytes - size_bytes;
    return highest;
  }

  // The lowest offset at or above `from_bytes` where `size_bytes` misses every taken range
  // and ends at or under `width_bytes`; SIZE_MAX where there is none.
  std::size_t fit_under(std::size_t from_bytes, std::size_t size_bytes, std::size_t width_bytes) const {
    const std::size_t offset_bytes = first_fit_from(taken_, from_bytes, size_bytes);
    return offset_bytes <= width_bytes && width_bytes - offset_bytes >= size_bytes ? offset_bytes : SIZE_MAX;
  }

  const std::vector<step_block>& blocks_;
  const std::vector<std::size_t>& sequence_;
  const std::size_t phases_;
  std::vector<ring_block> placed_;
  // Indices into placed_ whose lifetime has not ended, in (offset, end) order (Note [Ring order]).
  std::vector<std::size_t> active_;
  std::vector<std::pair<std::size_t, std::size_t>> taken_;
  std::vector<std::size_t> offsets_;
  std::size_t short_lifetime_below_ = 0;  // blocks living shorter are placed off the cursor
};

// Note [Ring layout]: settles a layout -- each block, lowest first, down to the lowest place
// that misses every block whose lifetime meets its own -- until a sweep moves none, after
// kSettleSweeps sweeps, or when the lifetime tests of `pair_budget` run out. Never widens.
// The blocks are kept in offset order with their lifetimes as columns (Note [Lifetime
// columns]), so the blocks one meets are found 64 at a time and come out in offset order,
// with no sort per block; a block moved down moves to its place in that order.
void settle(std::vector<step_block>& blocks, std::size_t& pair_budget) {
  const std::size_t count = blocks.size();
  const auto lower = [&](std::size_t a, std::size_t b) {
    return blocks[a].offset_bytes != blocks[b].offset_bytes ? blocks[a].offset_bytes < blocks[b].offset_bytes : a < b;
  };
  std::vector<std::size_t> by_offset(count), position(count);
  for (std::size_t index = 0; index < count; ++index) by_offset[index] = index;
  std::sort(by_offset.begin(), by_offset.end(), lower);
  lifetime_columns lifetimes(count);  // in by_offset's order
  for (std::size_t at = 0; at < count; ++at) {
    const step_block& block = blocks[by_offset[at]];
    lifetimes.push_back(static_cast<std::uint32_t>(block.first_begin), static_cast<std::uint32_t>(block.first_end),
                        static_cast<std::uint32_t>(block.second_end));
    position[by_offset[at]] = at;
  }
  for (std::size_t sweep = 0; sweep < kSettleSweeps; ++sweep) {
    if (count > pair_budget / count) return;
    pair_budget -= count * count;
    const std::vector<std::size_t> lowest_first = by_offset;
    bool moved = false;
    for (const std::size_t index : lowest_first) {
      step_block& block = blocks[index];
      const auto begin = static_cast<std::uint32_t>(block.first_begin), end = static_cast<std::uint32_t>(block.first_end),
                 second_end = static_cast<std::uint32_t>(block.second_end);
      // The lowest gap among the blocks it meets, offered in offset order.
      lowest_gap gap(0, block.size_bytes);
      bool open = true;
      for (std::size_t word = 0; word * 64 < count && open; ++word) {
        for (std::uint64_t bits = lifetimes.meeting_bits(word, begin, end, second_end); bits != 0 && open;
             bits &= bits - 1) {
          const std::size_t other = by_offset[word * 64 + static_cast<std::size_t>(std::countr_zero(bits))];
          if (other != index) open = gap.offer(blocks[other].offset_bytes, blocks[other].offset_bytes + blocks[other].size_bytes);
        }
      }
      const std::size_t gap_begin = gap.offset_bytes();
      if (gap_begin >= block.offset_bytes) continue;
      // Down to gap_begin: to its place in offset order, the blocks between moving up one.
      block.offset_bytes = gap_begin;
      moved = true;
      const std::size_t from = position[index];
      const std::size_t to = static_cast<std::size_t>(
          std::lower_bound(by_offset.begin(), by_offset.begin() + static_cast<std::ptrdiff_t>(from), index, lower) -
          by_offset.begin());
      for (std::size_t at = from; at > to; --at) {
        by_offset[at] = by_offset[at - 1];
        position[by_offset[at]] = at;
        lifetimes.copy(at - 1, at);
      }
      by_offset[to] = index;
      position[index] = to;
      lifetimes.set(to, begin, end, second_end);
    }
    if (!moved) return;
  }
}

}  // namespace

std::size_t ring_layout(std::vector<step_block>& blocks, std::size_t phases, std::size_t peak_bytes,
                        std::size_t span_bytes, const std::atomic<bool>* cancel) {
  if (blocks.empty() || span_bytes <= peak_bytes) return span_bytes;
  // The step's own order (Note [Layout orders]): by `from_start`, one block per phase.
  const std::vector<std::size_t> sequence = placing_order(blocks, layout_order::step);
  const std::size_t width_step_bytes = std::max<std::size_t>(peak_bytes / kRingWidthSteps, 1);
  std::size_t pair_budget = kRingPairTests;  // shared by the variants
  for (const ring_variant variant : kRingVariants) {
    if (span_bytes <= peak_bytes || pair_budget == 0) break;
    if (variant == ring_variant::short_lived_on_top && blocks.size() > kShortLivedRingBlocks) break;
    ring_trial trial(blocks, sequence, phases, variant);
    for (std::size_t width_bytes = peak_bytes; width_bytes < span_bytes; width_bytes += width_step_bytes) {
      if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) return 0;
      if (!trial.fit(width_bytes, pair_budget)) {
        if (pair_budget == 0) break;
        continue;
      }
      std::vector<step_block> laid = blocks;
      for (std::size_t index = 0; index < laid.size(); ++index) laid[index].offset_bytes = trial.offsets()[index];
      settle(laid, pair_budget);
      std::size_t ring_span_bytes = 0;
      for (const step_block& block : laid) ring_span_bytes = std::max(ring_span_bytes, block.offset_bytes + block.size_bytes);
      // Under the width, so narrower than the span had: the next variant must beat it.
      blocks = std::move(laid);
      span_bytes = ring_span_bytes;
      break;
    }
  }
  return span_bytes;
}

}  // namespace fragless::core
