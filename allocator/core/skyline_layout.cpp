// Skyline layout (Note [Skyline layout]): a bounded depth-first search over which block
// takes the lowest free place next.
#include "core/skyline_layout.hpp"

#include "core/lifetime_columns.hpp"
#include "core/phase_max_tree.hpp"

#include <algorithm>
#include <bit>
#include <cassert>
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
// takes at most kSkylineDescents times the blocks' count of turns, and no more than
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
constexpr double kSkylineDescents = 2;
constexpr double kSkylineBlockVisits = 3.2e7;

// Note [Skyline dives]
// A depth-first search backs up from its last turns first, so a wrong turn early in a
// step is never undone however long it runs (Note [Canonical turns]). Where a search has
// narrowed a step by the area preference (the one for many-stream steps, Note [Skyline
// layout]) and it is still wider than its peak, kRandomDives more searches by that
// preference go down once each (one turn per block; pruned turns back up, as in a search),
// and at each turn of two choices take the second first with probability
// 1/kDeviationOneIn -- barring the first from its floor, as a turn's second choice does.
// So the alternatives spread over every depth of the step instead of its last turns. The
// deviations come from a generator seeded by the dive's number: the same blocks give the
// same layout. Measured with `fragless-bench layout --seeds 1000 --jobs 1` (every pass of
// every family laid out as one step; the library before and after side by side, one run
// each, layout CPU time summed over a family's 1,000 steps): passes above 1.01x their peak
// 575 -> 527 and above 1.03x 239 -> 228 -- many-stream steps 201 -> 153 and 42 -> 31, 157
// of them narrower -- 160 narrower in all, none wider; layout time +9 % on many-stream
// steps, +8 % on serving steps of growing caches (1 narrower), +2 % on `params-optimizer`
// (its worst step 198 -> 288 ms, dives that found nothing), the other families' the same.
// With `--families kv-cache-eviction,many-streams`: dives after every search still above
// its peak, cycling the three preferences: 150 and 29 many-stream steps, but serving
// steps' layout time +80 % for 1 narrower; by the area preference after every such search:
// 135 and 24, serving +88 %; stopping after two fruitless dives in a row: 187 and 35.
// Growing caches need a different search, not more of this one (an exact solver lays some
// of them out 8 % narrower).
constexpr std::size_t kRandomDives = 8;
constexpr std::uint64_t kDeviationOneIn = 10;

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

// Note [Canonical turns]
// A layout in which no block can move down is found by placing its blocks lowest offset
// first, each on its floor then: the search's turns need only place blocks in an order whose
// offsets never fall. Two things follow from that. First, a turn's second choice is a real
// alternative only if the first choice does not then go on the floor it had: where the two
// miss each other on one floor, "second, then first" is "first, then second" again, and the
// search spent half its backing-up on layouts it had already made. So when a turn takes its
// second choice, the first is barred from the floor it had until a block placed later raises
// that floor (it rests on that block instead); the bar is lifted when the turn is undone.
// Second, every block not placed yet will go at or above the floor of the block just placed,
// so the layout under way needs at least that floor plus the most the unplaced blocks hold at
// any one phase -- a bound the skyline bound (at each phase, the skyline there plus what is
// unplaced there) misses wherever the skyline is low and the floors are not, and one that
// lets the search back up from a hopeless turn sooner. The most is kept by a phase max tree
// (phase_max_tree.hpp), O(log phases) a turn. Measured with `fragless-bench layout` (every
// pass of 1,000 seeds of `kv-cache-eviction` and `many-streams` laid out as one step, the
// 593 steps laid out wider than 1.01x their peak): above 1.03x their peak 223 of 383
// serving steps instead of 226, 42 of 210 many-stream steps instead of 43; 66 narrower, 4
// wider; layout time within the machine's noise. Ten times the dives with it (a first
// version, whose bars a later turn could lift early): 221 and 40 (without it: 225 and 43) -- a
// depth-first search backs up from its last turns first and does not undo an early wrong
// one however long it runs -- so the search's budget stays as it was.

// Note [Skyline turns]
// A turn used to walk every unplaced block twice: once to raise the floors of those the
// placed block meets, once for the next turn's choices (the lowest floors, then ranks) --
// a branch on each block's data every time, about as costly as the greedy orders. Now:
//  - the unplaced blocks are kept as columns in the order of the unplaced list (floors,
//    sizes, ranks, and lifetimes as lifetime_columns), and the blocks the placed one meets
//    are found 64 at a time (Note [Lifetime columns]); only their floors are visited;
//  - a block's place among the choices is one number, its key: floor, then rank (ranks
//    below kMaxSkylineBlocks; a step wider than kMaxSkylineSpanBytes is not searched, so a
//    floor fits above them), all ones for a block that would end at or above the best
//    span. A turn only raises floors, removes the block placed and (when a layout is
//    found) lowers the best span, so keys only grow until a turn is undone. A walk over
//    all keys keeps the kCandidates smallest and the next one as a threshold; while two
//    kept candidates stay below it, they are the two smallest of all, and the turns that
//    follow read kCandidates keys instead of every block's. Otherwise the next turn walks
//    again. An undone turn returns the list and the floors to what they were as it began,
//    so each frame keeps the candidates of its start and undoing restores them.
// The choices are the same, turn for turn, as a walk over every block (checked against
// one at every turn in builds with assertions). The 318 first layouts of corpus seeds
// 1-30 of every family on one thread (a dump of their steps, not committed; medians of
// three runs): 1.99 s -> 1.67 s after Note [Lifetime columns] (2.56 s before both), every
// offset the same; kCandidates 32 or 64 were slower (the frames copy them), 16 the
// fastest of the three.

// Note [Skyline bound]
// The search backs up from a turn whose layout must end at or above the narrowest span
// known: at some phase the skyline there plus the unplaced blocks' live bytes there
// reaches it (Note [Skyline layout]). A turn changes the skyline only over the placed
// block's lifetime, where it becomes the block's top, and lowers the unplaced bytes there
// by the block's size, so the bound after it is the one before, or that top plus the most
// the unplaced blocks hold over the lifetime -- a range's maximum of the phase max tree
// that already answers "the most at any phase" (Note [Canonical turns]), O(log phases).
// It used to be a walk over every phase of the lifetime, once to place and once to undo,
// which also kept each phase's skyline height: heights nothing read, since a turn's
// choices come from the unplaced blocks' floors, raised as blocks are placed. The walk was
// a sixth of the time of the steps of a serving family's whole pass (5,772 phases, blocks
// live over most of them). The same bound, so the same turns and layouts (the digests
// of Note [Repair gathering]'s check).

// Note [Search scratch]
// A turn logs each floor it raises, to undo it: hundreds of thousands of entries deep in a
// serving step's whole pass, whose caches meet most of its blocks. A layout runs up to
// eleven searches in each direction, and each built its log afresh by doubling, the kernel
// faulting in and zeroing its pages every time (a fresh process laying out
// `speculative-decoding` seed 1's 2,886-block pass: 20,280 page faults). Now one log and one
// stack of frames serve every search of a skyline_layout (or skyline_dives) call, cleared as
// each starts, and a change is one word (old floor under kMaxSkylineSpanBytes, position
// under kMaxSkylineBlocks): 6,566 faults, that layout 454 -> 371 ms (`fragless-bench layout
// --families speculative-decoding --first-seed 1 --seeds 1 --jobs 1`, medians of five
// alternated runs), every offset the same. Each search's live bytes per phase are a running
// sum of step_live_changes, no longer a walk over every block's lifetime.
constexpr unsigned kRankBits = 16;
constexpr std::size_t kMaxSkylineBlocks = std::size_t{1} << kRankBits;
constexpr std::uint64_t kRankMask = (std::uint64_t{1} << kRankBits) - 1;
constexpr std::size_t kMaxSkylineSpanBytes = std::size_t{1} << (64 - kRankBits - 1);

class skyline_search {
public:
  struct scratch;  // Note [Search scratch]
  // `deviation_seed`: 0 for a search, else a dive's (Note [Skyline dives]).
  skyline_search(const std::vector<step_block>& blocks, skyline_preference preference, std::size_t best_span_bytes,
                 const std::atomic<bool>* cancel, std::uint64_t deviation_seed, scratch& kept)
      : unplaced_lifetimes_(blocks.size()), floor_changes_(kept.floor_changes), frames_(kept.frames),
        best_span_bytes_(best_span_bytes), cancel_(cancel), deviation_state_(deviation_seed) {
    floor_changes_.clear();
    frames_.clear();
    std::size_t phases = 0;
    const std::size_t count = blocks.size();
    blocks_.reserve(count);
    for (const step_block& block : blocks) {
      blocks_.push_back({block.size_bytes, static_cast<std::uint32_t>(block.first_begin),
                         static_cast<std::uint32_t>(block.first_end), static_cast<std::uint32_t>(block.second_end),
                         static_cast<std::uint32_t>(block.lifetime())});
      phases = std::max(phases, block.first_end);
    }
    // At each phase, every block's live bytes: the running sum of the changes at each phase
    // (a walk over each block's lifetime was blocks x phases, a step's whole pass per search).
    const std::vector<std::int64_t> live_change = step_live_changes(blocks, phases);
    std::vector<std::size_t> remaining_bytes(phases, 0);
    std::int64_t live_bytes = 0;
    for (std::size_t phase = 0; phase < phases; ++phase) {
      live_bytes += live_change[phase];
      remaining_bytes[phase] = static_cast<std::size_t>(live_bytes);
    }
    most_remaining_ = phase_max_tree(remaining_bytes);
    excluded_floor_bytes_.assign(count, kNotExcluded);
    offset_bytes_.assign(count, 0);
    // Each block's rank under the preference, so that a turn compares floors and ranks.
    by_rank_.resize(count);
    for (std::size_t index = 0; index < count; ++index) by_rank_[index] = index;
    const auto area = [&](std::size_t index) {
      return static_cast<double>(blocks_[index].size_bytes) * static_cast<double>(blocks_[index].lifetime);
    };
    std::sort(by_rank_.begin(), by_rank_.end(), [&](std::size_t a, std::size_t b) {
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
    rank_.resize(count);
    for (std::size_t rank = 0; rank < count; ++rank) rank_[by_rank_[rank]] = rank;
    // The unplaced blocks, all of them, as columns (Note [Skyline turns]).
    unplaced_.resize(count);
    position_.resize(count);
    unplaced_floor_bytes_.assign(count, 0);
    unplaced_size_bytes_.resize(count);
    unplaced_rank_.resize(count);
    for (std::size_t index = 0; index < count; ++index) {
      unplaced_[index] = position_[index] = index;
      unplaced_size_bytes_[index] = blocks_[index].size_bytes;
      unplaced_rank_[index] = rank_[index];
      unplaced_lifetimes_.push_back(blocks_[index].first_begin, blocks_[index].first_end, blocks_[index].second_end);
    }
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
        // Note [Canonical turns]: a turn of two choices barred its first on reaching its second;
        // the bar that block had before is restored.
        if (current.count > 1) excluded_floor_bytes_[current.choices[0]] = current.bar_before_bytes;
        frames_.pop_back();
        continue;
      }
      if (current.next == 1) {
        // Note [Canonical turns]: the first choice, not placed on its floor now, goes higher.
        const std::size_t first = current.choices[0];
        current.bar_before_bytes = excluded_floor_bytes_[first];
        excluded_floor_bytes_[first] = unplaced_floor_bytes_[position_[first]];
      }
      const std::size_t index = current.choices[current.next++];
      const std::size_t base_bytes = unplaced_floor_bytes_[position_[index]];
      if (base_bytes + blocks_[index].size_bytes >= best_span_bytes_) continue;  // the best narrowed since
      if (cancel_ != nullptr && cancel_->load(std::memory_order_relaxed)) return false;
      current.floor_mark = floor_changes_.size();
      current.placed = index;
      // Note [Canonical turns]: every block not placed yet goes at or above this floor.
      const std::size_t bound_bytes =
          std::max(place(index, base_bytes, current.bound_bytes), base_bytes + most_remaining_.most());
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
  static constexpr std::size_t kNotExcluded = SIZE_MAX;  // Note [Canonical turns]: no bar
  static constexpr std::uint64_t kNoChoice = UINT64_MAX;
  static constexpr std::size_t kCandidates = 16;  // Note [Skyline turns]
  struct frame {
    std::size_t choices[kSkylineWidth];
    std::size_t count = 0, next = 0;
    std::size_t bound_bytes = 0;                  // the skyline plus unplaced live bytes, most at any phase
    std::size_t floor_mark = 0;  // the undo log before this frame's placed block
    std::size_t placed = kNone;                   // the block this frame placed last, until undone
    // Note [Canonical turns]: the bar this turn's first choice had before the turn barred it
    // (an earlier turn's, on a lower floor), restored when the turn ends.
    std::size_t bar_before_bytes = kNotExcluded;
    // Note [Skyline turns]: the candidates as the turn began, restored when it is undone.
    std::size_t candidates[kCandidates];
    std::size_t candidate_count = 0;
    std::uint64_t candidate_threshold = kNoChoice;
    bool candidates_valid = false;
  };
  // What a turn changed, to undo it besides the unplaced blocks' live bytes: each floor it
  // raised (by its position in the unplaced list, which undoing the later turns restores).
  // The skyline itself is kept only as those floors (Note [Skyline bound]). One word each
  // (Note [Search scratch]); the old floor is below the span searched.
  struct floor_change {
    std::uint64_t packed = 0;  // old floor << kRankBits | position
    floor_change() noexcept = default;
    floor_change(std::size_t position, std::size_t old_bytes) noexcept : packed((std::uint64_t{old_bytes} << kRankBits) | position) {
      assert(position <= kRankMask && old_bytes < kMaxSkylineSpanBytes);
    }
    std::size_t position() const noexcept { return static_cast<std::size_t>(packed & kRankMask); }
    std::size_t old_bytes() const noexcept { return static_cast<std::size_t>(packed >> kRankBits); }
  };

public:
  // Note [Search scratch]: the undo log and the frames, kept from one search of a layout
  // to the next.
  struct scratch {
    std::vector<floor_change> floor_changes;
    std::vector<frame> frames;
  };

private:
  // Note [Skyline turns]: the order of a turn's choices, floor first, then rank; kNoChoice
  // for a block that would end at or above the best span.
  std::uint64_t choice_key(std::size_t position) const noexcept {
    const std::size_t floor_bytes = unplaced_floor_bytes_[position];
    const std::uint64_t key = (static_cast<std::uint64_t>(floor_bytes) << kRankBits) | unplaced_rank_[position];
    const std::uint64_t fits = floor_bytes + unplaced_size_bytes_[position] < best_span_bytes_ &&
                               excluded_floor_bytes_[unplaced_[position]] != floor_bytes;  // Note [Canonical turns]
    return key | (fits - 1);  // all ones where it does not fit (branch-free)
  }

  // A turn's choices: the first kSkylineWidth unplaced blocks that end below the best span
  // (Note [Skyline turns]: the smallest keys).
  void push_frame(std::size_t bound_bytes) {
    static_assert(kSkylineWidth == 2);
    frame next;
    next.bound_bytes = bound_bytes;
    std::uint64_t first = kNoChoice, second = kNoChoice;
    if (!smallest_keys(first, second)) {
      scan_keys();
      smallest_keys(first, second);
    }
    assert(choices_match_a_walk(first, second));
    if (first != kNoChoice) next.choices[next.count++] = by_rank_[first & kRankMask];
    if (second != kNoChoice) next.choices[next.count++] = by_rank_[second & kRankMask];
    // Note [Skyline dives]: the second choice first (run() bars the first as it takes it).
    if (deviation_state_ != 0 && next.count == 2 && deviates()) next.next = 1;
    next.candidate_count = candidates_.size();
    std::copy(candidates_.begin(), candidates_.end(), next.candidates);
    next.candidate_threshold = candidate_threshold_;
    next.candidates_valid = candidates_valid_;
    frames_.push_back(next);
  }

  // The two smallest of the keys offered so far, `first` the smaller.
  static void keep_two_smallest(std::uint64_t key, std::uint64_t& first, std::uint64_t& second) noexcept {
    second = std::min(second, std::max(first, key));
    first = std::min(first, key);
  }

  // Note [Skyline turns]: the two smallest keys from the kept candidates, if the kept ones
  // still tell them (both below the threshold no other block's key is under); false when
  // a scan is needed.
  bool smallest_keys(std::uint64_t& first, std::uint64_t& second) const noexcept {
    first = second = kNoChoice;
    if (!candidates_valid_) return false;
    for (const std::size_t index : candidates_) keep_two_smallest(choice_key(position_[index]), first, second);
    // An unplaced block outside the candidates has a key of at least the threshold (place()
    // took the placed ones out).
    return second < candidate_threshold_ || (second == kNoChoice && candidate_threshold_ == kNoChoice);
  }

#ifndef NDEBUG
  // The two smallest keys of all unplaced blocks, walked one by one.
  bool choices_match_a_walk(std::uint64_t first, std::uint64_t second) const noexcept {
    std::uint64_t walked_first = kNoChoice, walked_second = kNoChoice;
    for (std::size_t position = 0; position < unplaced_.size(); ++position)
      keep_two_smallest(choice_key(position), walked_first, walked_second);
    return first == walked_first && second == walked_second;
  }
#endif

  // Every unplaced block's key: the kCandidates smallest kept, and the next one as the
  // threshold (in one walk, a sorted list of the kCandidates + 1 smallest so far).
  void scan_keys() noexcept {
    std::uint64_t smallest[kCandidates + 1];
    std::size_t kept = 0;
    for (std::size_t position = 0; position < unplaced_.size(); ++position) {
      const std::uint64_t key = choice_key(position);
      if (kept == kCandidates + 1 && key >= smallest[kCandidates]) continue;
      std::size_t slot = kept < kCandidates + 1 ? kept++ : kCandidates;
      for (; slot > 0 && smallest[slot - 1] > key; --slot) smallest[slot] = smallest[slot - 1];
      smallest[slot] = key;
    }
    candidates_.clear();
    for (std::size_t each = 0; each < std::min(kept, kCandidates); ++each)
      if (smallest[each] != kNoChoice) candidates_.push_back(by_rank_[smallest[each] & kRankMask]);
    candidate_threshold_ = kept == kCandidates + 1 ? smallest[kCandidates] : kNoChoice;
    candidates_valid_ = true;
  }

  // Places a block on its floor: raises the skyline over its lifetime and the floors of the
  // unplaced blocks it meets (Note [Skyline turns]). Returns the new bound.
  std::size_t place(std::size_t index, std::size_t base_bytes, std::size_t bound_bytes) {
    const search_block& block = blocks_[index];
    const std::size_t top_bytes = base_bytes + block.size_bytes;
    add_remaining(block, -static_cast<std::int64_t>(block.size_bytes));
    // Note [Skyline bound]: over the block's lifetime the skyline is its top now.
    if (block.first_begin < block.first_end)
      bound_bytes = std::max(bound_bytes, top_bytes + most_remaining_.most_in(block.first_begin, block.first_end));
    if (block.second_end > 0) bound_bytes = std::max(bound_bytes, top_bytes + most_remaining_.most_in(0, block.second_end));
    // Out of the unplaced list: its last entry takes the block's position (undo_turn puts
    // them back, so the list is the same after a turn is undone).
    remove_unplaced(position_[index]);
    offset_bytes_[index] = base_bytes;
    const std::size_t count = unplaced_.size();
    for (std::size_t word = 0; word * 64 < count; ++word) {
      for (std::uint64_t meets = unplaced_lifetimes_.meeting_bits(word, block.first_begin, block.first_end, block.second_end);
           meets != 0; meets &= meets - 1) {
        const std::size_t position = word * 64 + static_cast<std::size_t>(std::countr_zero(meets));
        if (unplaced_floor_bytes_[position] >= top_bytes) continue;
        // Note [Canonical turns]: a barred block whose floor rises may be chosen again -- its
        // key falls, which the kept candidates do not allow for (Note [Skyline turns]).
        if (excluded_floor_bytes_[unplaced_[position]] == unplaced_floor_bytes_[position]) candidates_valid_ = false;
        floor_changes_.emplace_back(position, unplaced_floor_bytes_[position]);
        unplaced_floor_bytes_[position] = top_bytes;
      }
    }
    // Note [Skyline turns]: floors only rose (a barred block's key falls with its floor's
    // rise, and voided the candidates above), so the kept candidates still hold the smallest
    // keys, less the block placed.
    candidates_.erase(std::remove(candidates_.begin(), candidates_.end(), index), candidates_.end());
    return bound_bytes;
  }

  // The unplaced blocks' live bytes over a block's lifetime change by `amount`.
  void add_remaining(const search_block& block, std::int64_t amount) noexcept {
    most_remaining_.add(block.first_begin, block.first_end, amount);
    most_remaining_.add(0, block.second_end, amount);
  }

  // Moves the last unplaced block into `position`, whose block leaves the list.
  void remove_unplaced(std::size_t position) noexcept {
    const std::size_t last_position = unplaced_.size() - 1, last = unplaced_[last_position];
    move_unplaced(last_position, position);
    position_[last] = position;
    unplaced_.pop_back();
    unplaced_lifetimes_.pop_back();
  }

  void move_unplaced(std::size_t from, std::size_t to) noexcept {
    unplaced_[to] = unplaced_[from];
    unplaced_floor_bytes_[to] = unplaced_floor_bytes_[from];
    unplaced_size_bytes_[to] = unplaced_size_bytes_[from];
    unplaced_rank_[to] = unplaced_rank_[from];
    unplaced_lifetimes_.copy(from, to);
  }

  void undo_turn(frame& turn) noexcept {
    const search_block& block = blocks_[turn.placed];
    add_remaining(block, static_cast<std::int64_t>(block.size_bytes));
    for (std::size_t change = floor_changes_.size(); change > turn.floor_mark; --change)
      unplaced_floor_bytes_[floor_changes_[change - 1].position()] = floor_changes_[change - 1].old_bytes();
    floor_changes_.resize(turn.floor_mark);
    // Back into the list at its position; the block moved there goes back to the end.
    const std::size_t position = position_[turn.placed];
    const std::size_t end = unplaced_.size();
    unplaced_.push_back(turn.placed);
    unplaced_lifetimes_.push_back(block.first_begin, block.first_end, block.second_end);
    if (position != end) {
      move_unplaced(position, end);
      position_[unplaced_[end]] = end;
      unplaced_[position] = turn.placed;
      unplaced_lifetimes_.set(position, block.first_begin, block.first_end, block.second_end);
    }
    unplaced_floor_bytes_[position] = offset_bytes_[turn.placed];  // the floor it was placed on
    unplaced_size_bytes_[position] = block.size_bytes;
    unplaced_rank_[position] = rank_[turn.placed];
    turn.placed = kNone;
    // Note [Skyline turns]: the list and the floors are as the turn began, and so are the
    // candidates kept then.
    candidates_.assign(turn.candidates, turn.candidates + turn.candidate_count);
    candidate_threshold_ = turn.candidate_threshold;
    candidates_valid_ = turn.candidates_valid;
  }

  std::vector<search_block> blocks_;
  // At each phase, the unplaced blocks' live bytes: the most at any phase and over a range.
  phase_max_tree most_remaining_;
  // Note [Canonical turns]: by block, the floor it may not be placed on (kNotExcluded: none).
  std::vector<std::size_t> excluded_floor_bytes_;
  std::vector<std::size_t> offset_bytes_, best_offsets_;
  std::vector<std::size_t> rank_, by_rank_;  // by the preference, 0 first; the block of each rank
  // The blocks not placed (Note [Skyline turns]): their indices, and side by side their
  // floors, sizes, ranks and lifetimes; position_ is each block's index in the list.
  std::vector<std::size_t> unplaced_, position_;
  std::vector<std::size_t> unplaced_floor_bytes_, unplaced_size_bytes_;
  std::vector<std::uint64_t> unplaced_rank_;
  lifetime_columns unplaced_lifetimes_;
  std::vector<floor_change>& floor_changes_;  // Note [Search scratch]
  std::vector<frame>& frames_;
  // Note [Skyline turns]: blocks whose keys were the smallest at the last scan, and the
  // smallest key of the others then (kNoChoice when none); valid until a turn is undone.
  std::vector<std::size_t> candidates_;
  std::uint64_t candidate_threshold_ = kNoChoice;
  bool candidates_valid_ = false;
  std::size_t best_span_bytes_;
  const std::atomic<bool>* cancel_;
  std::uint64_t deviation_state_;  // Note [Skyline dives]: 0 in a search, never 0 in a dive

  // Note [Skyline dives]: one turn in kDeviationOneIn deviates (xorshift64, never 0 again).
  bool deviates() noexcept {
    deviation_state_ ^= deviation_state_ << 13;
    deviation_state_ ^= deviation_state_ >> 7;
    deviation_state_ ^= deviation_state_ << 17;
    return deviation_state_ % kDeviationOneIn == 0;
  }
};

// Runs one search (deviation_seed 0) or dive from the blocks' layout of `span_bytes` for at
// most `turn_budget` turns; where it finds a narrower layout, sets the blocks' offsets to it.
// Returns the span, 0 when cancelled. `kept`: Note [Search scratch].
std::size_t search_once(std::vector<step_block>& blocks, std::size_t span_bytes, std::size_t peak_bytes,
                        skyline_preference preference, std::size_t turn_budget, const std::atomic<bool>* cancel,
                        std::uint64_t deviation_seed, skyline_search::scratch& kept) {
  skyline_search search(blocks, preference, span_bytes, cancel, deviation_seed, kept);
  if (!search.run(turn_budget, peak_bytes)) return 0;
  if (search.best_span_bytes() >= span_bytes) return span_bytes;
  for (std::size_t index = 0; index < blocks.size(); ++index) blocks[index].offset_bytes = search.best_offsets()[index];
  return search.best_span_bytes();
}

// Whether the blocks may be searched at all (Note [Skyline layout], Note [Skyline turns]).
bool searchable(const std::vector<step_block>& blocks, std::size_t span_bytes, std::size_t turn_budget) {
  return !blocks.empty() && turn_budget >= blocks.size() && blocks.size() <= kMaxSkylineBlocks &&
         span_bytes <= kMaxSkylineSpanBytes;
}

std::size_t search_turn_budget(const std::vector<step_block>& blocks) {
  const double count = static_cast<double>(blocks.size());
  return static_cast<std::size_t>(std::min(kSkylineDescents * count, kSkylineBlockVisits / std::max(count, 1.0)));
}

// Note [Skyline dives]: up to kRandomDives seeded dives by the area preference, each from
// the narrowest layout so far. Returns the span, 0 when cancelled.
std::size_t run_dives(std::vector<step_block>& blocks, std::size_t span_bytes, std::size_t peak_bytes,
                      const std::atomic<bool>* cancel, skyline_search::scratch& kept) {
  for (std::size_t dive = 1; dive <= kRandomDives && span_bytes > peak_bytes; ++dive) {
    const std::uint64_t seed = 0x9E3779B97F4A7C15ull * dive;  // an odd number times 1-8: never 0
    span_bytes =
        search_once(blocks, span_bytes, peak_bytes, skyline_preference::largest_area, blocks.size(), cancel, seed, kept);
    if (span_bytes == 0) return 0;
  }
  return span_bytes;
}

}  // namespace

std::size_t skyline_layout(std::vector<step_block>& blocks, std::size_t span_bytes, const std::atomic<bool>* cancel) {
  const std::size_t turn_budget = search_turn_budget(blocks);
  if (!searchable(blocks, span_bytes, turn_budget)) return span_bytes;
  const std::size_t peak_bytes = step_peak_bytes(blocks);
  skyline_search::scratch kept;  // Note [Search scratch]
  bool area_narrowed = false;
  for (const skyline_preference preference : kSkylinePreferences) {
    if (span_bytes <= peak_bytes) break;
    const std::size_t searched = search_once(blocks, span_bytes, peak_bytes, preference, turn_budget, cancel, 0, kept);
    if (searched == 0) return 0;
    if (searched < span_bytes && preference == skyline_preference::largest_area) area_narrowed = true;
    span_bytes = searched;
  }
  if (!area_narrowed) return span_bytes;
  return run_dives(blocks, span_bytes, peak_bytes, cancel, kept);  // Note [Skyline dives]
}

std::size_t skyline_dives(std::vector<step_block>& blocks, std::size_t span_bytes, const std::atomic<bool>* cancel) {
  if (!searchable(blocks, span_bytes, search_turn_budget(blocks))) return span_bytes;
  skyline_search::scratch kept;  // Note [Search scratch]
  return run_dives(blocks, span_bytes, step_peak_bytes(blocks), cancel, kept);
}

}  // namespace fragless::core
