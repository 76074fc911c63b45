// The loop plan's table from a window's hash (the last kWindowTokens recorded tokens,
// Note [Loop plans] in loop_plan.hpp) to the newest log position where that window ended.
// Invariants: each hash is in at most one slot; a slot is empty exactly when its stored
// position is 0 (positions are kept + 1); the table is at most half full, so a probe
// always reaches an empty slot. Not thread-safe: its loop plan's owner holds the device
// lock around every call.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace fragless::core {

// Note [Window positions]
// Recording a loop looks up every large event's window (Note [Loop plans], "Where it
// costs"): a std::unordered_map divided the hash by a prime and followed a node for each,
// and on corpus pipeline-1f1b seed 17 that lookup was the allocator's costliest function
// in steady passes (4.4 % of the replay's samples, the replay's own clock reads 8.8 %).
// A flat table -- a power-of-two count of slots, a multiplicative hash, linear probing --
// answers with one multiply and, mostly, one slot: 3.4 % of the samples there now, most
// of it the slot's cache miss, which no table avoids (the instructions are as many).
// Clearing it (a new log) gives its memory back: a log of kMaxLogTokens events fills 2^18
// slots, 4 MiB.
class window_positions {
 public:
  // The position stored for `hash`, which `position` then replaces; nullopt when `hash`
  // was not there (it is added). Throws std::bad_alloc when the table cannot grow.
  std::optional<std::size_t> exchange(std::uint64_t hash, std::size_t position) {
    if (2 * (used_ + 1) > slots_.size()) grow();
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t at = home(hash);; at = (at + 1) & mask) {
      slot& here = slots_[at];
      if (here.position_plus_one == 0) {
        here = slot{hash, position + 1};
        ++used_;
        return std::nullopt;
      }
      if (here.hash == hash) {
        const std::size_t previous = here.position_plus_one - 1;
        here.position_plus_one = position + 1;
        return previous;
      }
    }
  }
  std::size_t size() const noexcept { return used_; }
  // Forgets every hash and gives the table's memory back.
  void clear() noexcept {
    std::vector<slot>().swap(slots_);
    used_ = 0;
  }

 private:
  struct slot {
    std::uint64_t hash = 0;
    std::size_t position_plus_one = 0;  // 0: empty
  };
  static constexpr std::size_t kFirstSlots = 1024;
  std::vector<slot> slots_;  // empty, or a power of two of them
  std::size_t used_ = 0;

  // Fibonacci hashing: the product's top log2(slot count) bits, so hashes alike in their
  // low bits spread. Only with slots.
  std::size_t home(std::uint64_t hash) const noexcept {
    return static_cast<std::size_t>((hash * 0x9E3779B97F4A7C15ull) >> (64 - std::countr_zero(slots_.size())));
  }
  void grow() {
    const std::size_t count = slots_.empty() ? kFirstSlots : 2 * slots_.size();
    std::vector<slot> old(count);
    old.swap(slots_);
    const std::size_t mask = count - 1;
    for (const slot& each : old) {
      if (each.position_plus_one == 0) continue;
      std::size_t at = home(each.hash);
      while (slots_[at].position_plus_one != 0) at = (at + 1) & mask;
      slots_[at] = each;
    }
  }
};

}  // namespace fragless::core
