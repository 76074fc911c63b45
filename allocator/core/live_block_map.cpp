// Address -> live block lookup (see live_block_map.hpp).
#include "core/live_block_map.hpp"

#include "core/address_table.hpp"

namespace fragless::core {

live_block_map::live_block_map() {
  for (shard& one : shards_) one.slots.resize(64);
}

std::size_t live_block_map::shard::find(std::uintptr_t address) const noexcept {
  if (address == 0) return kNotFound;  // 0 marks empty slots: never a block
  const std::size_t mask = slots.size() - 1;
  for (std::size_t at = home(address);; at = (at + 1) & mask) {
    if (slots[at].address == address) return at;
    if (slots[at].address == 0) return kNotFound;
  }
}

void live_block_map::shard::grow() {
  std::vector<entry> old(slots.size() * 2);
  old.swap(slots);
  const std::size_t mask = slots.size() - 1;
  for (entry& moved : old) {
    if (moved.address == 0) continue;
    std::size_t at = home(moved.address);
    while (slots[at].address != 0) at = (at + 1) & mask;
    slots[at] = std::move(moved);
  }
}

// Backward-shift deletion: later entries of the probe run move up, no tombstones.
void live_block_map::shard::erase_at(std::size_t at) noexcept {
  const std::size_t hole = shift_back_after(
      slots, at, [](const entry& slot) { return slot.address != 0; },
      [this](const entry& slot) { return home(slot.address); });
  slots[hole].address = 0;
  slots[hole].block = live_block{};
  --used;
}

void live_block_map::insert(std::uintptr_t address, live_block block) {
  shard& target = shard_for(address);
  std::lock_guard<spin_lock> lock(target.mutex);
  if (2 * (target.used + 1) > target.slots.size()) target.grow();
  const std::size_t mask = target.slots.size() - 1;
  std::size_t at = target.home(address);
  while (target.slots[at].address != 0) at = (at + 1) & mask;
  target.slots[at].address = address;
  target.slots[at].block = std::move(block);
  ++target.used;
}

std::optional<live_block> live_block_map::take_for_free(std::uintptr_t address) noexcept {
  shard& target = shard_for(address);
  std::lock_guard<spin_lock> lock(target.mutex);
  const std::size_t at = target.find(address);
  if (at == kNotFound) return std::nullopt;
  live_block& found = target.slots[at].block;
  if (found.owner != nullptr) {
    std::optional<live_block> block(std::move(found));
    target.erase_at(at);
    return block;
  }
  if (found.freeing) return std::nullopt;  // a second free while the first is under way
  // Note [Frees in flight]: the caller gets the whole record; the entry keeps what a
  // snapshot and a stream's retirement read, marked.
  std::optional<live_block> block(std::move(found));
  found = live_block{};
  found.size_bytes = block->size_bytes;
  found.stream = block->stream;
  found.device = block->device;
  found.cache = block->cache;
  found.freeing = true;
  return block;
}

void live_block_map::erase_freed(std::uintptr_t address) noexcept {
  shard& target = shard_for(address);
  std::lock_guard<spin_lock> lock(target.mutex);
  const std::size_t at = target.find(address);
  if (at != kNotFound && target.slots[at].block.freeing) target.erase_at(at);
}

std::optional<std::uintptr_t> live_block_map::containing(std::uintptr_t address) const {
  std::optional<std::uintptr_t> found;
  for_each([&](std::uintptr_t start, const live_block& block) {
    if (start <= address && address < start + block.size_bytes) found = start;
  });
  return found;
}

}  // namespace fragless::core
