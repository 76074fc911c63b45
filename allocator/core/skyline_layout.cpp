// Skyline layout (Note [Skyline layout]): a bounded depth-first search over which block
// takes the lowest free place next.
#include "core/skyline_layout.hpp"

#include <algorithm>
#include <cstdint>

namespace fragless::core {
namespace {

// Note [Skyline layout]
// The greedy orders (Note [Layout orders]) fix a sequence and put each block in the
// smallest gap it fits; refining (Note [Layout refinement]) changes the sequence. Where a
// step still ends above its peak, it is laid out again the other way round: the place
// decides the block. The skyline -- at each phase of the step, the top of the blocks
// placed there -- gives each unplaced block its floor, the highest top over its lifetime;
// at each turn the block with the lowest floor is placed on it, the way rectangles are
// packed from the bottom. Among equal floors a preference decides (then the first block):
// the longest-lived block (then the largest); where that search leaves the step above its
// peak, a second one prefers the most bytes x phases, and a third the block the step makes
// first, counted from where placing starts (kSkylinePreferences). Nothing goes under the
// skyline, so a layout under way needs at least the skyline plus the unplaced blocks' live
// bytes at some phase: where that reaches the narrowest span known, the search backs up
// to the latest turn and takes its second block instead (kSkylineWidth). Each search
// takes at most kSkylineDives times the blocks' count of turns, and no more than
// kSkylineBlockVisits over that count (each turn visits every unplaced block), so a step
// above 5,656 blocks is not searched: such steps are training steps, which the orders lay
// out within a fraction of a percent of their peak. The searches stop at the step's peak,
// which no layout beats. A layout is kept only if narrower than the one it started from;
// the searches are serial and their choices fixed, so the same blocks give the same layout.
// Why: an order places a block before it knows what will lie beside it. An exact solver
// (CP-SAT, offline) laid out at exactly their peak all 12 of the steps of fewer than
// kLayoutThreadBlocks blocks that the orders and refining had left 1.007-1.036x their peak,
// among the 123 first layouts of corpus seeds 101-115 (a debug dump, not committed); the
// other three such steps stay 1.16x (where the solver found nothing narrower). The first
// search reaches the peak on 10 of the 12, most at its first descent (largest first among
// equal floors did on 8). Each preference is for a kind of step the ones before it leave
// wide: the area for many-stream steps (corpus `many-streams` seed 254's 1,085-block step
// 1.162x -> 1.010x), the step's order for serving steps of growing caches, which the step
// order also lays out best among the greedy orders (`kv-cache-eviction` seed 880's
// 640-block step 1.066x -> 1.000x, the peak the exact solver had reached; seed 22's
// 1.195x -> 1.105x). Over the 51 small steps 1.0144x the peak -> 1.0088x geomean, for
// 0.2x their layout time; over the 72 larger ones 1.0158x -> 1.0078x, narrower on 49, for
// about two thirds of the time of the four orders laid out one after the other. On the
// corpus (1,000 seeds a family, five repetitions), against refined layouts alone: peaks
// lower by more than 1 % on 995 seeds and higher on 3 (a narrower layout now taken under
// the churn rule, Note [Loop plans], where the move budget had held the loop lower while
// still moving pages); seeds above 1.03x the ideal where the idealized packer reaches
// 1.01x 899 -> 461 (`unet-resolution` 174 -> 0, `many-streams` 237 -> 92,
// `kv-cache-eviction` 220 -> 140).
constexpr std::size_t kSkylineWidth = 2;
constexpr double kSkylineDives = 2;
constexpr double kSkylineBlockVisits = 3.2e7;

// Which block a floor takes among those it could (Note [Skyline layout]).
enum class skyline_preference {
  longest_lived,  // the longest lifetime, then the largest
  largest_area,   // the most bytes x phases, then the longest lifetime, then the largest
  step_order,     // the one the step makes first, counted from where placing starts
};
inline constexpr skyline_preference kSkylinePreferences[] = {
    skyline_preference::longest_lived, skyline_preference::largest_area, skyline_preference::step_order};

struct search_block {
  std::size_t size_bytes;
  std::uint32_t first_begin, first_end, second_end, lifetime;
};

class skyline_search {
public:
  skyline_search(const std::vector<step_block>& blocks, skyline_preference preference, std::size_t best_span_bytes,
                 const std::atomic<bool>* cancel)
      : best_span_bytes_(best_span_bytes), cancel_(cancel) {
    std::size_t phases = 0;
    blocks_.reserve(blocks.size());
    for (const step_block& block : blocks) {
      blocks_.push_back({block.size_bytes, static_cast<std::uint32_t>(block.first_begin),
                         static_cast<std::uint32_t>(block.first_end), static_cast<std::uint32_t>(block.second_end),
                         static_cast<std::uint32_t>(block.lifetime())});
      phases = std::max(phases, block.first_end);
    }
    height_bytes_.assign(phases, 0);
    remaining_bytes_.assign(phases, 0);
    for (const search_block& block : blocks_)
      for_each_phase(block, [&](std::size_t phase) { remaining_bytes_[phase] += block.size_bytes; });
    floor_bytes_.assign(blocks_.size(), 0);
    offset_bytes_.assign(blocks_.size(), 0);
    unplaced_.resize(blocks_.size());
    position_.resize(blocks_.size());
    for (std::size_t index = 0; index < blocks_.size(); ++index) unplaced_[index] = position_[index] = index;
    // Each block's rank under the preference, so that a turn compares floors and ranks.
    std::vector<std::size_t> order = unplaced_;
    const auto area = [&](std::size_t index) {
      return static_cast<double>(blocks_[index].size_bytes) * static_cast<double>(blocks_[index].lifetime);
    };
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      const search_block &x = blocks_[a], &y = blocks_[b];
      switch (preference) {
        case skyline_preference::largest_area:
          if (area(a) != area(b)) return area(a) > area(b);
          [[fallthrough]];
        case skyline_preference::longest_lived:
          if (x.lifetime != y.lifetime) return x.lifetime > y.lifetime;
          if (x.size_bytes != y.size_bytes) return x.size_bytes > y.size_bytes;
          break;
        case skyline_preference::step_order:
          if (blocks[a].from_start != blocks[b].from_start) return blocks[a].from_start < blocks[b].from_start;
          break;
      }
      return a < b;
    });
    rank_.resize(blocks_.size());
    for (std::size_t position = 0; position < order.size(); ++position) rank_[order[position]] = position;
  }

  // Runs the search for at most `turn_budget` turns (at least one descent), stopping at the
  // step's `peak_bytes`; false when cancelled. best_offsets() holds a narrower layout when
  // best_span_bytes() fell.
  bool run(std::size_t turn_budget, std::size_t peak_bytes) {
    const std::size_t count = blocks_.size();
    std::size_t turns = 0;
    frames_.reserve(count);
    push_frame(peak_bytes);
    while (!frames_.empty()) {
      if (frames_.back().placed != kNone) undo_turn(frames_.back());
      frame& current = frames_.back();
      if (current.next == current.count) {
        frames_.pop_back();
        continue;
      }
      const std::size_t index = current.choices[current.next++];
      const std::size_t base_bytes = floor_bytes_[index];
      if (base_bytes + blocks_[index].size_bytes >= best_span_bytes_) continue;  // the best narrowed since
      if (cancel_ != nullptr && cancel_->load(std::memory_order_relaxed)) return false;
      current.height_mark = height_runs_.size();
      current.floor_mark = floor_changes_.size();
      current.placed = index;
      const std::size_t bound_bytes = place(index, base_bytes, current.bound_bytes);
      if (bound_bytes >= best_span_bytes_) continue;  // undone at the next turn
      if (frames_.size() == count) {  // every block placed: the bound is the span
        best_span_bytes_ = bound_bytes;
        best_offsets_ = offset_bytes_;
        if (best_span_bytes_ <= peak_bytes) break;
        continue;
      }
      if (++turns > turn_budget) break;
      push_frame(bound_bytes);
    }
    return true;
  }

  std::size_t best_span_bytes() const noexcept { return best_span_bytes_; }
  const std::vector<std::size_t>& best_offsets() const noexcept { return best_offsets_; }

private:
  static constexpr std::size_t kNone = SIZE_MAX;
  struct frame {
    std::size_t choices[kSkylineWidth];
    std::size_t count = 0, next = 0;
    std::size_t bound_bytes = 0;                  // the skyline plus unplaced live bytes, most at any phase
    std::size_t height_mark = 0, floor_mark = 0;  // the undo logs before this frame's placed block
    std::size_t placed = kNone;                   // the block this frame placed last, until undone
  };
  // What a turn changed, to undo it: the skyline over the block's lifetime as runs of
  // phases of one height (in the order for_each_phase visits them; a dive keeps every
  // turn's, and the skyline is mostly flat over a lifetime), and each floor it raised.
  struct height_run {
    std::size_t old_bytes, phases;
  };
  struct floor_change {
    std::size_t index, old_bytes;
  };

  template <typename F>
  static void for_each_phase(const search_block& block, F&& f) {
    for (std::size_t phase = block.first_begin; phase < block.first_end; ++phase) f(phase);
    for (std::size_t phase = 0; phase < block.second_end; ++phase) f(phase);
  }

  // Whether block a takes a turn before block b (Note [Skyline layout]).
  bool earlier(std::size_t a, std::size_t b) const noexcept {
    if (floor_bytes_[a] != floor_bytes_[b]) return floor_bytes_[a] < floor_bytes_[b];
    return rank_[a] < rank_[b];
  }

  // The next turn's choices: the first kSkylineWidth unplaced blocks that end below the best span.
  void push_frame(std::size_t bound_bytes) {
    frame next;
    next.bound_bytes = bound_bytes;
    for (const std::size_t index : unplaced_) {
      if (floor_bytes_[index] + blocks_[index].size_bytes >= best_span_bytes_) continue;
      std::size_t position = next.count;
      while (position > 0 && earlier(index, next.choices[position - 1])) --position;
      if (position == kSkylineWidth) continue;
      if (next.count < kSkylineWidth) ++next.count;
      for (std::size_t slot = next.count - 1; slot > position; --slot) next.choices[slot] = next.choices[slot - 1];
      next.choices[position] = index;
    }
    frames_.push_back(next);
  }

  // Places a block on its floor: raises the skyline over its lifetime and the floors of the
  // unplaced blocks it meets. Returns the new bound.
  std::size_t place(std::size_t index, std::size_t base_bytes, std::size_t bound_bytes) {
    const search_block& block = blocks_[index];
    const std::size_t top_bytes = base_bytes + block.size_bytes;
    const std::size_t first_run = height_runs_.size();
    for_each_phase(block, [&](std::size_t phase) {
      if (height_runs_.size() > first_run && height_runs_.back().old_bytes == height_bytes_[phase])
        ++height_runs_.back().phases;
      else
        height_runs_.push_back({height_bytes_[phase], 1});
      height_bytes_[phase] = top_bytes;
      remaining_bytes_[phase] -= block.size_bytes;
      bound_bytes = std::max(bound_bytes, top_bytes + remaining_bytes_[phase]);
    });
    // Out of the unplaced list: its last entry takes the block's position (undo_turn puts
    // them back, so the list is the same after a turn is undone).
    const std::size_t position = position_[index], last = unplaced_.back();
    unplaced_[position] = last;
    position_[last] = position;
    unplaced_.pop_back();
    offset_bytes_[index] = base_bytes;
    for (const std::size_t other : unplaced_) {
      const search_block& candidate = blocks_[other];
      if (floor_bytes_[other] >= top_bytes ||
          !lifetimes_meet(candidate.first_begin, candidate.first_end, candidate.second_end, block.first_begin,
                          block.first_end, block.second_end))
        continue;
      floor_changes_.push_back({other, floor_bytes_[other]});
      floor_bytes_[other] = top_bytes;
    }
    return bound_bytes;
  }

  void undo_turn(frame& turn) noexcept {
    const search_block& block = blocks_[turn.placed];
    std::size_t run = turn.height_mark, run_left = 0;
    for_each_phase(block, [&](std::size_t phase) {
      if (run_left == 0) run_left = height_runs_[run++].phases;
      height_bytes_[phase] = height_runs_[run - 1].old_bytes;
      remaining_bytes_[phase] += block.size_bytes;
      --run_left;
    });
    height_runs_.resize(turn.height_mark);
    for (std::size_t change = floor_changes_.size(); change > turn.floor_mark; --change)
      floor_bytes_[floor_changes_[change - 1].index] = floor_changes_[change - 1].old_bytes;
    floor_changes_.resize(turn.floor_mark);
    const std::size_t position = position_[turn.placed];
    if (position == unplaced_.size()) {
      unplaced_.push_back(turn.placed);
    } else {
      const std::size_t moved = unplaced_[position];
      unplaced_.push_back(moved);
      position_[moved] = unplaced_.size() - 1;
      unplaced_[position] = turn.placed;
    }
    turn.placed = kNone;
  }

  std::vector<search_block> blocks_;
  std::vector<std::size_t> height_bytes_, remaining_bytes_, floor_bytes_, offset_bytes_, best_offsets_;
  std::vector<std::size_t> rank_;  // by the preference, 0 first
  std::vector<std::size_t> unplaced_, position_;  // the blocks not placed; each one's index in it
  std::vector<height_run> height_runs_;
  std::vector<floor_change> floor_changes_;
  std::vector<frame> frames_;
  std::size_t best_span_bytes_;
  const std::atomic<bool>* cancel_;
};

}  // namespace

std::size_t skyline_layout(std::vector<step_block>& blocks, std::size_t span_bytes, const std::atomic<bool>* cancel) {
  if (blocks.empty()) return span_bytes;
  const double count = static_cast<double>(blocks.size());
  const auto turn_budget = static_cast<std::size_t>(std::min(kSkylineDives * count, kSkylineBlockVisits / count));
  const std::size_t peak_bytes = step_peak_bytes(blocks);
  if (turn_budget < blocks.size()) return span_bytes;
  for (const skyline_preference preference : kSkylinePreferences) {
    if (span_bytes <= peak_bytes) break;
    skyline_search search(blocks, preference, span_bytes, cancel);
    if (!search.run(turn_budget, peak_bytes)) return 0;
    if (search.best_span_bytes() >= span_bytes) continue;
    for (std::size_t index = 0; index < blocks.size(); ++index) blocks[index].offset_bytes = search.best_offsets()[index];
    span_bytes = search.best_span_bytes();
  }
  return span_bytes;
}

}  // namespace fragless::core
