// A set of page indices below a fixed bound, as a two-level bitmap: the page map's cached
// free pages (page_map.hpp), which change on every allocation and free that empties or
// first touches a page, and which page moves and compaction walk from the highest down;
// and its mapped pages, which placement counts over a block's range a word at a time.
// Invariant: summary bit w is set exactly when word w has a bit set; size() is the number
// of bits set.
// Why not std::set: a block of n pages inserted or erased n tree nodes (a heap allocation
// each) on every free and allocation; on a many-stream corpus trace that was a quarter of
// the steady pass's host time. Here each is a bit flip, and the highest member below a
// page is found in a few word scans. Over the corpus (1,000 seeds per family, five
// repetitions) host ns per operation fell from 1,470 to 650 (geometric mean), with every
// peak and device call unchanged.
// Not thread-safe: the owner holds its device lock.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace fragless::core {

class page_set {
 public:
  static constexpr std::size_t npos = SIZE_MAX;

  page_set() = default;
  explicit page_set(std::size_t page_count);

  // Hot: one bit and, when a word empties or fills, one summary bit.
  void insert(std::size_t page) noexcept {
    std::uint64_t& word = words_[page / 64];
    const std::uint64_t bit = std::uint64_t{1} << (page % 64);
    if ((word & bit) != 0) return;
    if (word == 0) summary_[page / 4096] |= std::uint64_t{1} << (page / 64 % 64);
    word |= bit;
    ++size_;
  }
  void erase(std::size_t page) noexcept {
    std::uint64_t& word = words_[page / 64];
    const std::uint64_t bit = std::uint64_t{1} << (page % 64);
    if ((word & bit) == 0) return;
    word &= ~bit;
    if (word == 0) summary_[page / 4096] &= ~(std::uint64_t{1} << (page / 64 % 64));
    --size_;
  }
  // Adds / removes every page of [first, end), a word at a time (a block's whole pages).
  void insert_range(std::size_t first, std::size_t end) noexcept;
  void erase_range(std::size_t first, std::size_t end) noexcept;
  // Every page of [first, end) leaves `from` and joins `to` (and `also`, when not null): the
  // two or three range calls in one walk over the words (a block's whole pages as it is
  // placed or freed, Note [Whole pages] in page_map.cpp). The sets have the same bound.
  static void move_range(page_set& from, page_set& to, page_set* also, std::size_t first, std::size_t end) noexcept;
  bool contains(std::size_t page) const noexcept { return (words_[page / 64] >> (page % 64) & 1) != 0; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  // The highest member below `limit` (npos: none); highest_below(npos) is the highest member.
  std::size_t highest_below(std::size_t limit) const noexcept;
  // Members in [first, end), and the lowest page of [first, end) that is not one (end:
  // none): a word of 64 pages at a time.
  std::size_t count_in(std::size_t first, std::size_t end) const noexcept;
  // Appends every member to `out`, lowest first: the non-zero words through the summary.
  void append_members(std::vector<std::size_t>& out) const;
  // f(page) for every member, lowest first, then the set is empty: the non-zero words
  // through the summary, each cleared as it is read.
  template <typename F>
  void take_members(F&& f) noexcept {
    for (std::size_t summary_index = 0; summary_index < summary_.size(); ++summary_index) {
      for (std::uint64_t words_left = summary_[summary_index]; words_left != 0; words_left &= words_left - 1) {
        const std::size_t word_index = summary_index * 64 + static_cast<std::size_t>(std::countr_zero(words_left));
        for (std::uint64_t bits = words_[word_index]; bits != 0; bits &= bits - 1)
          f(word_index * 64 + static_cast<std::size_t>(std::countr_zero(bits)));
        words_[word_index] = 0;
      }
      summary_[summary_index] = 0;
    }
    size_ = 0;
  }
  std::size_t first_absent(std::size_t first, std::size_t end) const noexcept;
  // The lowest member of [first, end) (end: none), skipping empty words through the summary.
  std::size_t first_member(std::size_t first, std::size_t end) const noexcept;

 private:
  std::vector<std::uint64_t> words_;    // bit p % 64 of word p / 64: page p is a member
  std::vector<std::uint64_t> summary_;  // bit w % 64 of summary word w / 64: word w is non-zero
  std::size_t size_ = 0;
  // The bits of word `word_index` that fall in [first, end), and how many there are.
  struct masked_bits {
    std::uint64_t mask;
    std::size_t count;
  };
  static masked_bits word_mask(std::size_t word_index, std::size_t first, std::size_t end) noexcept;
  void insert_masked(std::size_t word_index, masked_bits in_range) noexcept;
  void erase_masked(std::size_t word_index, masked_bits in_range) noexcept;
};

}  // namespace fragless::core
