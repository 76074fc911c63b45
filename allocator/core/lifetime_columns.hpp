// Lifetime columns: the lifetimes of a step's blocks as three arrays of phases, kept in an
// order the caller chooses, and the test of one lifetime against all of them 64 at a time,
// without a branch per block (Note [Lifetime columns]). The greedy layout (step_layout.cpp)
// finds with it the placed blocks a new block meets, the skyline search (skyline_layout.cpp)
// the unplaced blocks a placed one meets, the ring's settling (ring_layout.cpp) the blocks
// one it moves down meets, the layout repair (layout_repair.cpp) every block's neighbours.
// Invariant: entries [0, size()) are the lifetimes inserted, in insertion positions; the
// arrays hold capacity() + kPaddingEntries entries, so a group of the widest test's lanes
// read from any entry below size() stays inside them; meeting_bits(...) sets bit j exactly
// when entry 64 w + j is below size() and lifetimes_meet(...) holds for it, whichever test
// the processor runs (Note [Wide lifetime tests] in lifetime_columns.cpp).
// Plain C++ (vector extensions), no shared state but the wide test chosen at load.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

namespace fragless::core {

// Note [Lifetime columns]
// The greedy layout tests each block against every block placed before it (blocks^2
// tests, lay_out_in), and about one in seven meets (948 million tests over the 318 first
// layouts of corpus seeds 1-30 of every family, 15 % meeting): a branch on the result is
// mispredicted often, and the test was 44 % of a layout's time. So the lifetimes are kept
// as columns (begins, ends, second ends), four phases to a vector (GCC and Clang vector
// extensions: SSE2 on x86-64, NEON on AArch64, plain code elsewhere), the test is made on
// four at once, and 64 tests give a bit mask whose set bits -- the blocks that meet -- are
// visited in order (eight to a vector where the processor has AVX2: Note [Wide lifetime
// tests]). The test is lifetimes_meet (step_layout.hpp) term for term. Those 318
// layouts on one thread (a dump of their steps, not committed; medians of three runs):
// 2.56 s -> 1.99 s, every offset the same. A branch-free test one block at a time, without
// the vectors, was slower than the branch (2.86 s).
class lifetime_columns {
public:
  static constexpr std::size_t kLanes = 4;
  // Entries past capacity() a group may read: the widest group's (Note [Wide lifetime tests]).
  static constexpr std::size_t kPaddingEntries = 8;

  explicit lifetime_columns(std::size_t capacity)
      : capacity_(capacity),
        begins_(std::make_unique<std::uint32_t[]>(capacity + kPaddingEntries)),
        ends_(std::make_unique<std::uint32_t[]>(capacity + kPaddingEntries)),
        second_ends_(std::make_unique<std::uint32_t[]>(capacity + kPaddingEntries)) {}

  std::size_t size() const noexcept { return size_; }
  std::size_t capacity() const noexcept { return capacity_; }

  // Inserts a lifetime [begin, end) + [0, second_end) at `position` (<= size() <
  // capacity()), moving later entries up one.
  void insert(std::size_t position, std::uint32_t begin, std::uint32_t end, std::uint32_t second_end) noexcept {
    const std::size_t moved = size_ - position;
    std::memmove(&begins_[position + 1], &begins_[position], moved * sizeof(std::uint32_t));
    std::memmove(&ends_[position + 1], &ends_[position], moved * sizeof(std::uint32_t));
    std::memmove(&second_ends_[position + 1], &second_ends_[position], moved * sizeof(std::uint32_t));
    ++size_;
    set(position, begin, end, second_end);
  }

  // Appends a lifetime (size() < capacity()).
  void push_back(std::uint32_t begin, std::uint32_t end, std::uint32_t second_end) noexcept {
    set(size_++, begin, end, second_end);
  }
  void pop_back() noexcept { --size_; }
  // Moves entries [from, size()) to the end of `other` (which has room for them), in order.
  void move_tail_to(std::size_t from, lifetime_columns& other) noexcept {
    const std::size_t moved = size_ - from;
    std::memcpy(&other.begins_[other.size_], &begins_[from], moved * sizeof(std::uint32_t));
    std::memcpy(&other.ends_[other.size_], &ends_[from], moved * sizeof(std::uint32_t));
    std::memcpy(&other.second_ends_[other.size_], &second_ends_[from], moved * sizeof(std::uint32_t));
    other.size_ += moved;
    size_ = from;
  }
  // Entry `position` (< size()) becomes the lifetime given / a copy of entry `from`.
  void set(std::size_t position, std::uint32_t begin, std::uint32_t end, std::uint32_t second_end) noexcept {
    begins_[position] = begin;
    ends_[position] = end;
    second_ends_[position] = second_end;
  }
  void copy(std::size_t from, std::size_t to) noexcept {
    begins_[to] = begins_[from];
    ends_[to] = ends_[from];
    second_ends_[to] = second_ends_[from];
  }

  // Bit j: entry 64 * word + j meets the lifetime [begin, end) + [0, second_end)
  // (lifetimes_meet); no bit at or above size(). Eight at a time where the processor can
  // (Note [Wide lifetime tests] in lifetime_columns.cpp), else four.
  std::uint64_t meeting_bits(std::size_t word, std::uint32_t begin, std::uint32_t end,
                             std::uint32_t second_end) const noexcept {
    const std::size_t first = word * 64;
    const std::size_t count = size_ - first < 64 ? size_ - first : 64;
    if (kWideMeetingBits != nullptr)
      return kWideMeetingBits(&begins_[first], &ends_[first], &second_ends_[first], count, begin, end, second_end);
    return narrow_meeting_bits(&begins_[first], &ends_[first], &second_ends_[first], count, begin, end, second_end);
  }

  // The test of up to 64 entries (count), `Width` at a time in vectors of type `Lanes`
  // (Width uint32 lanes). Reads up to Width - 1 entries past count; no bit at or above
  // count. Always inlined, so that the wide test's instance is compiled for AVX2 with it.
  template <typename Lanes, std::size_t Width>
  [[gnu::always_inline]] static inline std::uint64_t meeting_bits_in_lanes(
      const std::uint32_t* begins, const std::uint32_t* ends, const std::uint32_t* second_ends, std::size_t count,
      std::uint32_t begin, std::uint32_t end, std::uint32_t second_end) noexcept {
    static_assert(sizeof(Lanes) == Width * sizeof(std::uint32_t) && 32 % Width == 0);
    std::uint64_t bits = 0;
    const std::uint32_t wraps = second_end > 0 ? ~std::uint32_t{0} : 0;
    Lanes first_lane_bits = {};
    for (std::size_t lane = 0; lane < Width; ++lane) first_lane_bits[lane] = std::uint32_t{1} << lane;
    // 32 tests per half word: lane i of group g holds bit Width g + i, folded across lanes once.
    for (std::size_t half = 0; half < count; half += 32) {
      Lanes folded = {};
      Lanes lane_bits = first_lane_bits;
      const std::size_t half_end = count - half < 32 ? count : half + 32;
      for (std::size_t lane = half; lane < half_end; lane += Width, lane_bits <<= Width) {
        Lanes other_begin, other_end, other_second_end;
        std::memcpy(&other_begin, &begins[lane], sizeof other_begin);
        std::memcpy(&other_end, &ends[lane], sizeof other_end);
        std::memcpy(&other_second_end, &second_ends[lane], sizeof other_second_end);
        // lifetimes_meet, term for term; each comparison is all ones or zero per lane.
        const Lanes meet = (Lanes)((begin < other_end) & (other_begin < end)) | (Lanes)(begin < other_second_end) |
                           (Lanes)(other_begin < second_end) | (wraps & (Lanes)(other_second_end > 0));
        folded |= meet & lane_bits;
      }
      std::uint32_t word_bits = 0;
      for (std::size_t lane = 0; lane < Width; ++lane) word_bits |= folded[lane];
      bits |= static_cast<std::uint64_t>(word_bits) << half;
    }
    if (count < 64) bits &= (std::uint64_t{1} << count) - 1;
    return bits;
  }

  // Four at a time: SSE2, NEON or plain code (one vector register on SSE2 and NEON).
  static std::uint64_t narrow_meeting_bits(const std::uint32_t* begins, const std::uint32_t* ends,
                                           const std::uint32_t* second_ends, std::size_t count, std::uint32_t begin,
                                           std::uint32_t end, std::uint32_t second_end) noexcept {
    typedef std::uint32_t lanes __attribute__((vector_size(16)));
    return meeting_bits_in_lanes<lanes, kLanes>(begins, ends, second_ends, count, begin, end, second_end);
  }

  // Note [Wide lifetime tests]: the same test eight at a time, compiled for AVX2; null
  // where the processor lacks it (or is not x86-64). Reads up to 7 entries past count.
  using meeting_bits_function = std::uint64_t (*)(const std::uint32_t* begins, const std::uint32_t* ends,
                                                  const std::uint32_t* second_ends, std::size_t count,
                                                  std::uint32_t begin, std::uint32_t end, std::uint32_t second_end);
  static const meeting_bits_function kWideMeetingBits;

private:
  std::size_t capacity_;
  std::size_t size_ = 0;
  std::unique_ptr<std::uint32_t[]> begins_, ends_, second_ends_;
};

}  // namespace fragless::core
