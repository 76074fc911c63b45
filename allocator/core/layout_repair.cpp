// Layout repair: the blocks that end above a target pushed in under it, evicting others
// that then look for room of their own, with a weight on the blocks that keep failing to
// get in (Note [Layout repair]).
#include "core/layout_repair.hpp"

#include "core/lifetime_columns.hpp"
#include "core/offset_order.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <memory>
#include <utility>

namespace fragless::core {

// Note [Layout repair]
// Every stage before this one builds a layout block by block and keeps it only if it is
// narrower: once a block is placed, a later one that needed its room goes above. Serving
// steps (corpus kv-cache-eviction: caches growing and evicted, hundreds of them live at
// once, the step's live bytes within a few percent of its peak for most of it) stay 2-14 %
// above their peak that way, where an exact solver (CP-SAT, 150 s, kv-cache-eviction seed
// 196) found 1.020x. So where the layout is still above the step's peak, it is repaired,
// by the rule of ejection searches in packing: push the blocks that stick out back in,
// evicting others where they must, and make the blocks that keep failing heavier.
//  - A target is set a little under the span (an eighth of the way down to the peak, at
//    least 512 B), and the blocks that end above it are taken out.
//  - One at a time (at random), a block taken out goes into the tightest gap under the
//    target among the placed blocks its lifetime meets. Where none is wide enough it is put
//    where it evicts least (below), and the evicted blocks go back, largest first, into the
//    tightest gaps they find; those that find none are out.
//  - Strict phase, the first half of the work: a move is kept only if the blocks out weigh
//    no more than before (each block's bytes times its weight), else it is undone and the
//    block's weight goes up by one; "where it evicts least" is the place overlapping the
//    fewest bytes of eight tried (the floor, and at random the end or the start of one of
//    the blocks it meets). Without the weights (all 1: plain bytes out) the moves stop at
//    one or two blocks no swap lets in (kv-cache-eviction seeds 1-25: 2 of 13 wide steps
//    narrower, 12 with them): a block that keeps failing comes to outweigh what it
//    evicts, and the blocks around it move.
//  - Weighted phase, the second half: every move is kept, each block still out gets one
//    heavier after it, and the place is the one of all (the floor, the target, every end
//    and start of the blocks it meets) whose overlapped blocks weigh least. The strict
//    phase keeps the layouts near the best and samples places at random, which suits the
//    serving steps; the weighted phase wanders further and sees every place, which suits
//    many-stream steps and random ones. Each alone, on 300 seeds (`fragless-bench layout
//    --seeds 300 --families kv-cache-eviction,many-streams`), steps above 1.03x their peak:
//    strict 23 and 6, weighted 30 and 1, both halves 23 and 2.
//  - When none is out the layout is the new best, and a lower target is set.
// It stops at the peak, which no layout beats, or when its work runs out: each block met
// counts one as it is gathered or weighed, kRepairVisitsPerPair x blocks^2 of them, at
// least kRepairLeastVisits and at most kRepairVisits (about 12 ns each on a 2-core machine
// since Note [Repair gathering], 41 before -- the 50 repairs of every family's seeds 1-30,
// a timing not committed: up to about 2.5 ms for a step laid out on the allocating thread,
// Note [Layout threads], and about 0.1-0.2 s on a layout thread or for a whole pass).
// Deterministic: a generator with a fixed seed.
// Measured: docs/compaction.md, "Kept, next: repair where the search stops".

// Note [Repair gathering]
// Each move gathers, in offset order, the placed blocks that meet the block moved (and
// each it evicts), and weighs the places beside them. Sorting a gather's blocks each time
// was a fifth of a large step's layout (perf over `fragless-bench layout` of the
// speculative-decoding family: the sort 19.5 %, the gather around it 10.7 %), and two
// binary searches per weighed place another 13 %. Now:
//  - every block is kept in one list by (offset, end, index), moved within it as its
//    offset changes (offset_order.hpp: a binary search and a rotation of the entries
//    between), and the blocks each one meets are also a row of bits; a gather whose sort
//    would cost more than a walk of every block (row length x log2 of it at least the
//    blocks' count) walks the list and keeps the placed blocks whose bit is set; a
//    shorter one is sorted as before;
//  - the places at a gathered block's end, and below its start, are weighed in two sweeps
//    (the places taken in increasing order, so both counts -- blocks starting below the
//    place's end, blocks ended by its start -- only grow), then offered in the order they
//    always were: the same ties, the same draws of the generator;
//  - the strict phase's overlap count stops at the first block starting above the place.
// The blocks come out in the same order of (offset, end) as the sort gave, and the weights
// are sums of whole numbers (bytes times whole weights), so every choice is the one made
// before. Measured with Note [Skyline bound]'s change, `fragless-bench layout --seeds 100`
// (the 1,700 steps of every family on one thread; the library before and after, three
// alternated runs): every step laid out offset for offset as before (the CSV's
// offsets_digest, all 5,100 runs), layout CPU time 96 -> 67 s at the median --
// `speculative-decoding` 0.53x (its median step 318 -> 128 ms), `many-streams` 0.58x,
// `two-loops` 0.66x, `params-optimizer` 0.77x, `kv-cache-eviction` 0.83x; the families
// whose steps are not repaired or searched (above kRepairMaxBlocks and 5,656 blocks, or at
// their peak first) the same.
namespace {

constexpr std::size_t kRepairMaxBlocks = 4096;
constexpr std::size_t kRepairMaxMeetings = std::size_t{1} << 22;  // 16 MiB of neighbour indices
constexpr double kRepairVisits = 8e6;
constexpr double kRepairVisitsPerPair = 8;
constexpr double kRepairLeastVisits = 2e5;
constexpr std::size_t kTargetFraction = 8;  // each target: span - (span - peak) / 8
constexpr std::size_t kTargetStepBytes = 512;
constexpr std::size_t kPlacesTried = 8;

struct xorshift64 {
  std::uint64_t state;  // never 0
  std::uint64_t next() noexcept {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  }
  std::size_t below(std::size_t bound) noexcept { return static_cast<std::size_t>(next() % bound); }
};

// The step's conflict graph: for each block, the other blocks its lifetime meets, as
// compressed rows and as a row of bits (Note [Repair gathering]). build() gives up (false)
// past kRepairMaxMeetings entries: a step that dense is not repaired.
struct meeting_rows {
  std::vector<std::uint32_t> row_begin, others;
  std::vector<std::uint64_t> bits;  // block a's row: words [a * words_per_row, (a + 1) * words_per_row)
  std::size_t words_per_row = 0;
  bool meets(const std::uint64_t* row, std::size_t other) const noexcept { return (row[other / 64] >> (other % 64)) & 1; }
  const std::uint64_t* bits_of(std::size_t index) const noexcept { return &bits[index * words_per_row]; }
  bool build(const std::vector<step_block>& blocks) {
    const std::size_t count = blocks.size();
    const auto lifetime = [&](std::size_t index) {
      return std::array<std::uint32_t, 3>{static_cast<std::uint32_t>(blocks[index].first_begin),
                                          static_cast<std::uint32_t>(blocks[index].first_end),
                                          static_cast<std::uint32_t>(blocks[index].second_end)};
    };
    lifetime_columns lifetimes(count);  // Note [Lifetime columns]: 64 tests at a time
    for (std::size_t index = 0; index < count; ++index) {
      const auto [begin, end, second_end] = lifetime(index);
      lifetimes.push_back(begin, end, second_end);
    }
    row_begin.assign(count + 1, 0);
    words_per_row = (count + 63) / 64;
    bits.assign(count * words_per_row, 0);
    for (std::size_t a = 0; a < count; ++a) {
      row_begin[a] = static_cast<std::uint32_t>(others.size());
      const auto [begin, end, second_end] = lifetime(a);
      for (std::size_t word = 0; word < words_per_row; ++word) {
        std::uint64_t meeting = lifetimes.meeting_bits(word, begin, end, second_end);
        if (word == a / 64) meeting &= ~(std::uint64_t{1} << (a % 64));  // not itself
        bits[a * words_per_row + word] = meeting;
        for (; meeting != 0; meeting &= meeting - 1)
          others.push_back(static_cast<std::uint32_t>(word * 64 + static_cast<std::size_t>(std::countr_zero(meeting))));
      }
      if (others.size() > kRepairMaxMeetings) return false;
    }
    row_begin[count] = static_cast<std::uint32_t>(others.size());
    return true;
  }
};

// One repair (Note [Layout repair]): the state of the blocks under the current target.
class layout_repair {
public:
  layout_repair(const std::vector<step_block>& blocks, const meeting_rows& rows, double visit_budget)
      : blocks_(blocks), rows_(rows), visit_budget_(visit_budget), offsets_(blocks.size()), placed_(blocks.size(), 1),
        weights_(blocks.size(), 1.0), by_offset_(blocks.size()), extents_(blocks.size()) {
    for (std::size_t index = 0; index < blocks.size(); ++index) {
      offsets_[index] = blocks[index].offset_bytes;
      by_offset_[index] = static_cast<std::uint32_t>(index);
    }
    std::sort(by_offset_.begin(), by_offset_.end(), [this](std::uint32_t a, std::uint32_t b) { return placed_before(a, b); });
  }

  // Lowers the span target by target until the peak or the budget; returns the narrowest
  // span reached and leaves its offsets in best_offsets(). Returns 0 when cancelled.
  std::size_t run(std::size_t span_bytes, std::size_t peak_bytes, const std::atomic<bool>* cancel) {
    std::vector<std::size_t> best = offsets_;  // offsets_ is best again at each target
    while (span_bytes > peak_bytes && visits_ < visit_budget_) {
      const std::size_t step = std::max(kTargetStepBytes, (span_bytes - peak_bytes) / kTargetFraction / kTargetStepBytes * kTargetStepBytes);
      const std::size_t limit = std::max(span_bytes - std::min(step, span_bytes), peak_bytes);
      const int outcome = fit_under(limit, cancel);
      if (outcome < 0) return 0;
      if (outcome == 0) break;
      span_bytes = 0;
      for (std::size_t index = 0; index < blocks_.size(); ++index) span_bytes = std::max(span_bytes, end_of(index));
      best = offsets_;
    }
    offsets_ = std::move(best);
    return span_bytes;
  }
  const std::vector<std::size_t>& best_offsets() const noexcept { return offsets_; }

private:
  // Note [Layout repair]: the second half of the work is the weighted phase.
  bool weighted_phase() const noexcept { return visits_ >= visit_budget_ / 2; }
  std::size_t end_of(std::size_t index) const noexcept { return offsets_[index] + blocks_[index].size_bytes; }
  double weighed(std::size_t index) const noexcept {
    return weights_[index] * static_cast<double>(blocks_[index].size_bytes);
  }

  // Note [Repair gathering]: the order every block is kept in.
  bool placed_before(std::uint32_t a, std::uint32_t b) const noexcept {
    return offsets_[a] != offsets_[b] ? offsets_[a] < offsets_[b] : end_of(a) != end_of(b) ? end_of(a) < end_of(b) : a < b;
  }

  // Moves a block to `offset_bytes`, and to its place in by_offset_ (Note [Repair gathering]).
  void set_offset(std::size_t index, std::size_t offset_bytes) noexcept {
    if (offsets_[index] == offset_bytes) return;
    const auto less = [this](std::uint32_t a, std::uint32_t b) { return placed_before(a, b); };
    reorder_after(by_offset_, static_cast<std::uint32_t>(index), less, [&] { offsets_[index] = offset_bytes; });
  }

  // Gathers the placed blocks `index` meets, as extents by offset (Note [Repair gathering]).
  void gather(std::size_t index) {
    extents_.clear();
    const std::size_t row_length = rows_.row_begin[index + 1] - rows_.row_begin[index];
    visits_ += static_cast<double>(row_length);
    if (!walk_beats_sort(row_length, by_offset_.size())) {
      for (std::uint32_t at = rows_.row_begin[index]; at < rows_.row_begin[index + 1]; ++at) {
        const std::size_t other = rows_.others[at];
        if (placed_[other]) extents_.push_back({offsets_[other], end_of(other), other});
      }
      std::sort(extents_.begin(), extents_.end());
      return;
    }
    const std::uint64_t* row = rows_.bits_of(index);
    for (const std::uint32_t other : by_offset_)
      if (placed_[other] && rows_.meets(row, other)) extents_.push_back({offsets_[other], end_of(other), other});
  }

  // The offset of the tightest gap under `limit` among the gathered extents that holds
  // `size_bytes` (the lowest among equals), or SIZE_MAX.
  std::size_t tightest_gap(std::size_t size_bytes, std::size_t limit) const noexcept {
    std::size_t covered = 0, best_offset = SIZE_MAX, best_gap = SIZE_MAX;
    const auto consider = [&](std::size_t top) {
      if (top > covered && top - covered >= size_bytes && top - covered < best_gap) {
        best_gap = top - covered;
        best_offset = covered;
      }
    };
    for (const auto& [offset, end, who] : extents_) {
      consider(std::min(offset, limit));
      covered = std::max(covered, end);
    }
    consider(limit);
    return best_offset;
  }

  // Where a block of `size_bytes` under `limit` evicts least. In the weighted phase, every
  // place at the floor, at the target, at a gathered block's end or with its end at a
  // gathered block's start is weighed by the weight of the blocks it overlaps (ties broken
  // at random); in the strict phase, sampled_place.
  std::size_t least_evicting_place(std::size_t size_bytes, std::size_t limit) {
    if (!weighted_phase()) return sampled_place(size_bytes, limit);
    const std::size_t count = extents_.size();
    visits_ += 2 * static_cast<double>(count);
    ends_.clear();
    start_weights_.assign(count + 1, 0.0);
    for (std::size_t at = 0; at < count; ++at) {
      start_weights_[at + 1] = start_weights_[at] + weighed(extents_[at].who);
      ends_.push_back({extents_[at].end, weighed(extents_[at].who), at});
    }
    std::sort(ends_.begin(), ends_.end());
    end_weights_.assign(count + 1, 0.0);
    for (std::size_t at = 0; at < count; ++at) end_weights_[at + 1] = end_weights_[at] + ends_[at].weight;
    // The weight of the blocks that overlap [place, place + size_bytes): those that start
    // below its end, less those that end at or below its start.
    const auto overlapped = [&](std::size_t place) {
      const auto starting = static_cast<std::size_t>(
          std::lower_bound(extents_.begin(), extents_.end(), place + size_bytes,
                           [](const extent& e, std::size_t value) { return e.offset < value; }) -
          extents_.begin());
      const auto ended = static_cast<std::size_t>(
          std::upper_bound(ends_.begin(), ends_.end(), place,
                           [](std::size_t value, const end_entry& e) { return value < e.end; }) -
          ends_.begin());
      return start_weights_[starting] - end_weights_[ended];
    };
    // The same for the places at a gathered block's end and below its start, all at once:
    // walked in increasing order, both counts only grow (Note [Repair gathering]).
    weight_above_.resize(count);
    weight_below_.resize(count);
    for (std::size_t at = 0, starting = 0, ended = 0; at < count; ++at) {  // at ends, by end
      const std::size_t place = ends_[at].end;
      while (starting < count && extents_[starting].offset < place + size_bytes) ++starting;
      while (ended < count && ends_[ended].end <= place) ++ended;
      weight_above_[ends_[at].at] = start_weights_[starting] - end_weights_[ended];
    }
    for (std::size_t at = 0, starting = 0, ended = 0; at < count; ++at) {  // below starts, by offset
      if (extents_[at].offset < size_bytes) continue;
      const std::size_t place = extents_[at].offset - size_bytes;
      while (starting < count && extents_[starting].offset < place + size_bytes) ++starting;
      while (ended < count && ends_[ended].end <= place) ++ended;
      weight_below_[at] = start_weights_[starting] - end_weights_[ended];
    }
    std::size_t place = 0, ties = 0;
    double least = 0;
    bool any = false;
    const auto consider = [&](std::size_t candidate, double weight) {
      if (candidate + size_bytes > limit) return;
      if (!any || weight < least) {
        any = true;
        least = weight;
        place = candidate;
        ties = 1;
      } else if (weight == least && random_.below(++ties) == 0) {
        place = candidate;
      }
    };
    consider(0, overlapped(0));
    consider(limit - size_bytes, overlapped(limit - size_bytes));
    for (std::size_t at = 0; at < count; ++at) {
      consider(extents_[at].end, weight_above_[at]);
      if (extents_[at].offset >= size_bytes) consider(extents_[at].offset - size_bytes, weight_below_[at]);
    }
    return place;
  }

  // The strict phase's place: of kPlacesTried -- the floor, and at random the end of a
  // gathered block or with its end at a gathered block's start -- the one that overlaps the
  // fewest gathered bytes.
  std::size_t sampled_place(std::size_t size_bytes, std::size_t limit) {
    std::size_t place = 0, least = SIZE_MAX;
    const std::size_t tries = std::min(kPlacesTried, extents_.size() + 1);
    for (std::size_t attempt = 0; attempt < tries; ++attempt) {
      std::size_t candidate = 0;
      if (attempt > 0) {
        const auto& [offset, end, who] = extents_[random_.below(extents_.size())];
        candidate = random_.below(2) == 0 ? end : (offset >= size_bytes ? offset - size_bytes : 0);
      }
      candidate = std::min(candidate, limit - size_bytes);
      std::size_t overlapped = random_.below(size_bytes / 8 + 1);  // ties broken at random
      for (const auto& [offset, end, who] : extents_) {
        if (offset >= candidate + size_bytes) break;  // and so do all after it (by offset)
        if (candidate < end) overlapped += end - offset;
      }
      if (overlapped < least) {
        least = overlapped;
        place = candidate;
      }
    }
    return place;
  }

  // Fits every block under `limit`: 1 when done, 0 when the budget ran out (the offsets
  // then are partial), -1 when cancelled.
  int fit_under(std::size_t limit, const std::atomic<bool>* cancel) {
    out_.clear();
    double out_weight = 0;
    for (std::size_t index = 0; index < blocks_.size(); ++index) {
      placed_[index] = end_of(index) <= limit;
      if (!placed_[index]) {
        out_.push_back(index);
        out_weight += weighed(index);
      }
    }
    while (!out_.empty()) {
      if (visits_ >= visit_budget_) return 0;
      if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) return -1;
      const std::size_t pick = random_.below(out_.size());
      const std::size_t block = out_[pick];
      const std::size_t size = blocks_[block].size_bytes;
      if (size > limit) return 0;
      gather(block);
      const std::size_t gap = tightest_gap(size, limit);
      if (gap != SIZE_MAX) {
        set_offset(block, gap);
        placed_[block] = 1;
        out_weight -= weighed(block);
        out_[pick] = out_.back();
        out_.pop_back();
        continue;
      }
      // Evict what lies where it overlaps least, and put the evicted back where they fit.
      const std::size_t place = least_evicting_place(size, limit);
      changed_.assign(1, block);
      saved_.assign(1, offsets_[block]);
      evicted_.clear();
      for (std::uint32_t at = rows_.row_begin[block]; at < rows_.row_begin[block + 1]; ++at) {
        const std::size_t other = rows_.others[at];
        if (placed_[other] && offsets_[other] < place + size && place < end_of(other)) evicted_.push_back(other);
      }
      for (const std::size_t other : evicted_) {
        placed_[other] = 0;
        changed_.push_back(other);
        saved_.push_back(offsets_[other]);
      }
      set_offset(block, place);
      placed_[block] = 1;
      double trial_weight = out_weight - weighed(block);
      std::sort(evicted_.begin(), evicted_.end(), [&](std::size_t a, std::size_t b) {
        return blocks_[a].size_bytes != blocks_[b].size_bytes ? blocks_[a].size_bytes > blocks_[b].size_bytes : a < b;
      });
      for (const std::size_t other : evicted_) {
        gather(other);
        const std::size_t again = tightest_gap(blocks_[other].size_bytes, limit);
        if (again != SIZE_MAX) {
          set_offset(other, again);
          placed_[other] = 1;
        } else {
          trial_weight += weighed(other);
        }
      }
      if (weighted_phase() || trial_weight <= out_weight) {
        out_[pick] = out_.back();
        out_.pop_back();
        for (const std::size_t other : evicted_)
          if (!placed_[other]) out_.push_back(other);
        out_weight = trial_weight;
        if (weighted_phase()) {  // every block left out gets heavier
          out_weight = 0;
          for (const std::size_t other : out_) {
            weights_[other] += 1;
            out_weight += weighed(other);
          }
        }
      } else {
        for (std::size_t at = 0; at < changed_.size(); ++at) {
          set_offset(changed_[at], saved_[at]);
          placed_[changed_[at]] = 1;
        }
        placed_[block] = 0;
        weights_[block] += 1;
        out_weight += static_cast<double>(size);
      }
    }
    return 1;
  }

  const std::vector<step_block>& blocks_;
  const meeting_rows& rows_;
  const double visit_budget_;
  double visits_ = 0;
  std::vector<std::size_t> offsets_;
  std::vector<char> placed_;
  std::vector<double> weights_;
  std::vector<std::size_t> out_, evicted_, changed_, saved_;
  std::vector<std::uint32_t> by_offset_;  // every block by (offset, end, index), Note [Repair gathering]
  struct extent {
    std::size_t offset, end, who;
    bool operator<(const extent& o) const noexcept { return offset != o.offset ? offset < o.offset : end < o.end; }
  };
  // The gathered extents: room for every block, filled without a check per entry.
  class extent_list {
  public:
    explicit extent_list(std::size_t capacity) : items_(new extent[capacity]) {}
    void clear() noexcept { count_ = 0; }
    void push_back(const extent& entry) noexcept { items_[count_++] = entry; }
    std::size_t size() const noexcept { return count_; }
    extent* begin() const noexcept { return items_.get(); }
    extent* end() const noexcept { return items_.get() + count_; }
    const extent& operator[](std::size_t at) const noexcept { return items_[at]; }

  private:
    std::unique_ptr<extent[]> items_;
    std::size_t count_ = 0;
  };
  extent_list extents_;
  struct end_entry {  // sorted by end, then weight: the same sums whatever the tie's order
    std::size_t end;
    double weight;
    std::size_t at;  // the extent's index
    bool operator<(const end_entry& o) const noexcept {
      return end != o.end ? end < o.end : weight != o.weight ? weight < o.weight : at < o.at;
    }
  };
  std::vector<end_entry> ends_;
  std::vector<double> start_weights_, end_weights_, weight_above_, weight_below_;
  xorshift64 random_{0x9E3779B97F4A7C15ull};
};

}  // namespace

std::size_t repair_layout(std::vector<step_block>& blocks, std::size_t span_bytes, std::size_t peak_bytes,
                          const std::atomic<bool>* cancel) {
  const std::size_t count = blocks.size();
  if (count < 2 || span_bytes <= peak_bytes || count > kRepairMaxBlocks) return span_bytes;
  meeting_rows rows;
  if (!rows.build(blocks)) return span_bytes;
  const double pairs = static_cast<double>(count) * static_cast<double>(count);
  layout_repair repair(blocks, rows, std::min(kRepairVisits, std::max(kRepairLeastVisits, kRepairVisitsPerPair * pairs)));
  const std::size_t repaired = repair.run(span_bytes, peak_bytes, cancel);
  if (repaired == 0) return 0;  // cancelled
  if (repaired >= span_bytes) return span_bytes;
  for (std::size_t index = 0; index < count; ++index) blocks[index].offset_bytes = repair.best_offsets()[index];
  return repaired;
}

}  // namespace fragless::core
