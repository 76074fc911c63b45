// The two-level page bitmap's search (see page_set.hpp).
#include "core/page_set.hpp"

#include <algorithm>
#include <bit>

namespace fragless::core {

namespace {

// Hot: members in a word. Without the popcnt instruction in the target (baseline x86-64),
// std::popcount is a call into the compiler's runtime library, 2-3 % of a steady corpus
// pass's host time; the bit-parallel count is a dozen inline instructions.
inline std::size_t count_bits(std::uint64_t word) noexcept {
#if defined(__POPCNT__) || !defined(__x86_64__)
  return static_cast<std::size_t>(std::popcount(word));
#else
  word -= (word >> 1) & 0x5555555555555555ULL;
  word = (word & 0x3333333333333333ULL) + ((word >> 2) & 0x3333333333333333ULL);
  word = (word + (word >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
  return static_cast<std::size_t>((word * 0x0101010101010101ULL) >> 56);
#endif
}

}  // namespace

page_set::page_set(std::size_t page_count) : words_((page_count + 63) / 64, 0), summary_((page_count + 4095) / 4096, 0) {}

inline page_set::masked_bits page_set::word_mask(std::size_t word_index, std::size_t first, std::size_t end) noexcept {
  const std::size_t word_first = word_index * 64;
  const std::size_t low = std::max(first, word_first) - word_first;       // 0..63
  const std::size_t high = std::min(end, word_first + 64) - word_first;   // 1..64
  const std::uint64_t below_high = high == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << high) - 1;
  return {below_high & (~std::uint64_t{0} << low), high - low};
}

// Note [Whole-word counts]
// A block's pages are usually all absent from a set before it is inserted and all present
// before it is erased (Note [Whole pages] in page_map.cpp), and a block placed where pages
// are cached is usually all mapped: the bits that change, or are counted, are then the
// whole mask, whose count word_mask knows. Only a word whose bits in the range are mixed,
// some set and some not, is counted bit by bit (count_bits: a dozen instructions without
// the popcnt instruction). Steady instructions per allocation and free, with the fused walk
// of move_range: corpus huge-tensors seed 17 3,968 -> 3,842, pipeline-1f1b seed 17
// 5,066 -> 4,848, sharded-data-parallel seed 17 5,479 -> 5,187.
inline void page_set::insert_masked(std::size_t word_index, masked_bits in_range) noexcept {
  std::uint64_t& word = words_[word_index];
  const std::uint64_t added = in_range.mask & ~word;
  if (added == 0) return;
  word |= added;
  size_ += added == in_range.mask ? in_range.count : count_bits(added);
  summary_[word_index / 64] |= std::uint64_t{1} << (word_index % 64);
}

inline void page_set::erase_masked(std::size_t word_index, masked_bits in_range) noexcept {
  std::uint64_t& word = words_[word_index];
  const std::uint64_t removed = in_range.mask & word;
  if (removed == 0) return;
  word &= ~removed;
  size_ -= removed == in_range.mask ? in_range.count : count_bits(removed);
  if (word == 0) summary_[word_index / 64] &= ~(std::uint64_t{1} << (word_index % 64));
}

void page_set::insert_range(std::size_t first, std::size_t end) noexcept {
  if (first >= end) return;
  for (std::size_t index = first / 64; index <= (end - 1) / 64; ++index) insert_masked(index, word_mask(index, first, end));
}

void page_set::erase_range(std::size_t first, std::size_t end) noexcept {
  if (first >= end) return;
  for (std::size_t index = first / 64; index <= (end - 1) / 64; ++index) erase_masked(index, word_mask(index, first, end));
}

void page_set::move_range(page_set& from, page_set& to, page_set* also, std::size_t first, std::size_t end) noexcept {
  if (first >= end) return;
  for (std::size_t index = first / 64; index <= (end - 1) / 64; ++index) {
    const masked_bits in_range = word_mask(index, first, end);
    from.erase_masked(index, in_range);
    to.insert_masked(index, in_range);
    if (also != nullptr) also->insert_masked(index, in_range);
  }
}

std::size_t page_set::count_in(std::size_t first, std::size_t end) const noexcept {
  std::size_t count = 0;
  if (first >= end) return 0;
  for (std::size_t index = first / 64; index <= (end - 1) / 64; ++index) {
    const masked_bits in_range = word_mask(index, first, end);
    const std::uint64_t members = words_[index] & in_range.mask;
    count += members == in_range.mask ? in_range.count : members == 0 ? 0 : count_bits(members);
  }
  return count;
}

std::size_t page_set::first_absent(std::size_t first, std::size_t end) const noexcept {
  if (first >= end) return end;
  for (std::size_t index = first / 64; index <= (end - 1) / 64; ++index) {
    const std::uint64_t absent = ~words_[index] & word_mask(index, first, end).mask;
    if (absent != 0) return index * 64 + static_cast<std::size_t>(std::countr_zero(absent));
  }
  return end;
}

std::size_t page_set::first_member(std::size_t first, std::size_t end) const noexcept {
  if (first >= end) return end;
  const std::size_t last_index = (end - 1) / 64;
  std::size_t index = first / 64;
  while (index <= last_index) {
    const std::uint64_t present = words_[index] & word_mask(index, first, end).mask;
    if (present != 0) return index * 64 + static_cast<std::size_t>(std::countr_zero(present));
    // The next non-zero word, through the summary.
    ++index;
    while (index <= last_index) {
      const std::uint64_t in_summary = summary_[index / 64] & (~std::uint64_t{0} << (index % 64));
      if (in_summary != 0) {
        index = index / 64 * 64 + static_cast<std::size_t>(std::countr_zero(in_summary));
        break;
      }
      index = (index / 64 + 1) * 64;
    }
  }
  return end;
}

std::size_t page_set::highest_below(std::size_t limit) const noexcept {
  const std::size_t bound = std::min(limit, words_.size() * 64);
  if (size_ == 0 || bound == 0) return npos;
  const std::size_t last = bound - 1;  // the highest page asked about
  // The word holding `last`, masked to pages <= last.
  std::size_t word_index = last / 64;
  const std::uint64_t in_word = words_[word_index] & (~std::uint64_t{0} >> (63 - last % 64));
  if (in_word != 0) return word_index * 64 + 63 - static_cast<std::size_t>(std::countl_zero(in_word));
  if (word_index == 0) return npos;
  // The highest non-zero word below it, through the summary.
  const std::size_t below = word_index - 1;
  std::size_t summary_index = below / 64;
  std::uint64_t in_summary = summary_[summary_index] & (~std::uint64_t{0} >> (63 - below % 64));
  while (in_summary == 0) {
    if (summary_index == 0) return npos;
    in_summary = summary_[--summary_index];
  }
  word_index = summary_index * 64 + 63 - static_cast<std::size_t>(std::countl_zero(in_summary));
  return word_index * 64 + 63 - static_cast<std::size_t>(std::countl_zero(words_[word_index]));
}

void page_set::append_members(std::vector<std::size_t>& out) const {
  out.reserve(out.size() + size_);
  for (std::size_t summary_index = 0; summary_index < summary_.size(); ++summary_index) {
    for (std::uint64_t words_left = summary_[summary_index]; words_left != 0; words_left &= words_left - 1) {
      const std::size_t word_index = summary_index * 64 + static_cast<std::size_t>(std::countr_zero(words_left));
      for (std::uint64_t bits = words_[word_index]; bits != 0; bits &= bits - 1)
        out.push_back(word_index * 64 + static_cast<std::size_t>(std::countr_zero(bits)));
    }
  }
}

}  // namespace fragless::core
