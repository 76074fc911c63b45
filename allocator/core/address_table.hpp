// A hash table keyed by block address: open addressing, linear probing, backward-shift
// deletion (no tombstones), Fibonacci hashing of the address's 512 B units. For indexes a
// hot path inserts into and erases from on every allocation and free, and that never need
// their keys in order (Note [Address tables]).
// Invariants: keys are nonzero (0 marks an empty slot) and each is present at most once;
// an entry sits in the probe run that starts at its home slot, with no empty slot between;
// the table is at most half full, its size a power of two.
// Not thread-safe: the owner's lock covers every call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace fragless::core {

// Note [Address tables]
// The VMM pool kept every placed block in a std::map (start -> size and loop-plan
// sequence) for two lookups by address, an exact one and "the block ending here". Each
// allocation inserted a node and each free erased one: a tree search and a rebalance, and a
// heap allocation and free wherever the spare nodes ran out (tree_nodes.hpp keeps 64;
// a loop freeing more blocks than that before allocating again allocated a node for
// most of them). "The block of size s ending at a" is the block starting at a - s, so both
// lookups are exact, and a hash table serves them: one probe run per operation, no node,
// no host memory once the table has grown to the program's live block count. The free
// index stays a tree: best fit and coalescing need order. Corpus, 35 seeds (three a family
// and two more), instructions inside the allocator's calls (scripts/count_instructions.py),
// passes 2-5: 356.5 -> 330.5 million; seeds 1-200 of every family, fragless alone, with the
// free index's hinted re-key: host ns/op 0.894x, every peak and device call the same.
// Backward-shift deletion over a linear-probing slot array whose size is a power of two:
// the entries after `hole` in its probe run move up unless their home lies cyclically in
// (hole, next], so no tombstone is left. Returns the slot left empty, for the caller to
// clear. `occupied(slot)` and `home(slot)` say whether a slot holds an entry and where
// its run starts (address_table and live_block_map's shards share this).
template <typename Slot, typename Occupied, typename Home>
std::size_t shift_back_after(std::vector<Slot>& slots, std::size_t hole, Occupied&& occupied, Home&& home) noexcept {
  const std::size_t mask = slots.size() - 1;
  for (std::size_t next = (hole + 1) & mask; occupied(slots[next]); next = (next + 1) & mask) {
    const std::size_t wanted = home(slots[next]);
    const bool stays = hole <= next ? (wanted > hole && wanted <= next) : (wanted > hole || wanted <= next);
    if (stays) continue;
    slots[hole] = std::move(slots[next]);
    hole = next;
  }
  return hole;
}

template <typename Value>
class address_table {
 public:
  explicit address_table(std::size_t initial_slots = 64) { reset(initial_slots); }

  std::size_t size() const noexcept { return used_; }

  // Inserts `key`, or replaces its value. May throw std::bad_alloc when the table grows
  // (the table is unchanged then).
  void insert_or_assign(std::uintptr_t key, Value value) {
    if (2 * (used_ + 1) > slots_.size()) grow();
    std::size_t at = home(key);
    while (slots_[at].key != 0 && slots_[at].key != key) at = (at + 1) & mask_;
    if (slots_[at].key == 0) ++used_;
    slots_[at].key = key;
    slots_[at].value = std::move(value);
  }

  Value* find(std::uintptr_t key) noexcept {
    const std::size_t at = slot_of(key);
    return at == kAbsent ? nullptr : &slots_[at].value;
  }
  const Value* find(std::uintptr_t key) const noexcept {
    const std::size_t at = slot_of(key);
    return at == kAbsent ? nullptr : &slots_[at].value;
  }

  // Removes `key` and gives its value to *removed (when not null); false if absent.
  bool erase(std::uintptr_t key, Value* removed = nullptr) noexcept {
    std::size_t hole = slot_of(key);
    if (hole == kAbsent) return false;
    if (removed != nullptr) *removed = std::move(slots_[hole].value);
    hole = shift_back_after(
        slots_, hole, [](const slot& one) { return one.key != 0; }, [this](const slot& one) { return home(one.key); });
    slots_[hole] = slot{};
    --used_;
    return true;
  }

  // f(key, const Value&) for every entry, in no particular order.
  template <typename F>
  void for_each(F&& f) const {
    for (const slot& one : slots_)
      if (one.key != 0) f(one.key, one.value);
  }

 private:
  static constexpr std::size_t kAbsent = SIZE_MAX;
  struct slot {
    std::uintptr_t key = 0;
    Value value{};
  };

  void reset(std::size_t slot_count) {
    unsigned bits = 1;
    while ((std::size_t{1} << bits) < slot_count) ++bits;
    slots_.assign(std::size_t{1} << bits, slot{});
    mask_ = slots_.size() - 1;
    shift_ = 64 - bits;
    used_ = 0;
  }
  // Blocks are 512 B aligned: the address's 512 B units, mixed; the top bits pick the slot.
  std::size_t home(std::uintptr_t key) const noexcept {
    return static_cast<std::size_t>(((static_cast<std::uint64_t>(key) >> 9) * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  std::size_t slot_of(std::uintptr_t key) const noexcept {
    if (key == 0) return kAbsent;
    for (std::size_t at = home(key);; at = (at + 1) & mask_) {
      if (slots_[at].key == key) return at;
      if (slots_[at].key == 0) return kAbsent;
    }
  }
  void grow() {
    std::vector<slot> old(slots_.size() * 2);  // may throw: the table is unchanged then
    old.swap(slots_);
    mask_ = slots_.size() - 1;
    --shift_;
    for (slot& moved : old) {
      if (moved.key == 0) continue;
      std::size_t at = home(moved.key);
      while (slots_[at].key != 0) at = (at + 1) & mask_;
      slots_[at] = std::move(moved);
    }
  }

  std::vector<slot> slots_;
  std::size_t mask_ = 0;
  unsigned shift_ = 64;
  std::size_t used_ = 0;
};

}  // namespace fragless::core
