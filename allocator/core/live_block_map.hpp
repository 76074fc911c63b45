// Every block currently handed out (or pending free), by address: what free(),
// record_stream() and the snapshot look up. Sharded by address hash, one lock per shard,
// so threads freeing different blocks rarely meet.
// Invariant: an address is in the map from the moment allocate returns it until its
// free is accepted; entries never overlap (the pools place blocks disjointly).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "core/stream_set.hpp"

namespace fragless::core {

struct slab;

struct live_block {
  std::size_t size_bytes = 0;       // what the block occupies (class size or 512 B-rounded)
  std::size_t requested_bytes = 0;  // what the caller asked for
  stream_id stream = nullptr;       // allocation stream
  int device = 0;
  slab* owner = nullptr;            // small pool: its slab; large pool: nullptr
  std::uint32_t slot = 0;
  stream_set other_streams;         // record_stream() uses
};

class live_block_map {
 public:
  void insert(std::uintptr_t address, live_block block) {
    shard& target = shard_for(address);
    std::lock_guard<std::mutex> lock(target.mutex);
    target.blocks.emplace(address, std::move(block));
  }
  // Removes and returns the block starting at `address`, if any.
  std::optional<live_block> take(std::uintptr_t address) noexcept {
    shard& target = shard_for(address);
    std::lock_guard<std::mutex> lock(target.mutex);
    auto at = target.blocks.find(address);
    if (at == target.blocks.end()) return std::nullopt;
    live_block block = std::move(at->second);
    target.blocks.erase(at);
    return block;
  }
  // Applies f(live_block&) to the block at `address` under its shard lock; false if absent.
  template <typename F>
  bool update(std::uintptr_t address, F&& f) {
    shard& target = shard_for(address);
    std::lock_guard<std::mutex> lock(target.mutex);
    auto at = target.blocks.find(address);
    if (at == target.blocks.end()) return false;
    f(at->second);
    return true;
  }
  // Visits every block: f(address, const live_block&). Locks shards one at a time.
  template <typename F>
  void for_each(F&& f) const {
    for (const shard& one : shards_) {
      std::lock_guard<std::mutex> lock(one.mutex);
      for (const auto& [address, block] : one.blocks) f(address, block);
    }
  }
  // The block whose range contains `address` (slow: walks everything; error messages).
  std::optional<std::uintptr_t> containing(std::uintptr_t address) const;

 private:
  static constexpr std::size_t kShards = 64;
  struct shard {
    mutable std::mutex mutex;
    std::unordered_map<std::uintptr_t, live_block> blocks;
  };
  shard& shard_for(std::uintptr_t address) noexcept {
    // Blocks are 512 B aligned: drop those bits, then mix.
    const std::uint64_t key = (address >> 9) * 0x9E3779B97F4A7C15ull;
    return shards_[key >> 58];
  }
  std::array<shard, kShards> shards_;
};

}  // namespace fragless::core
