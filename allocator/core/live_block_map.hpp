// Every block currently handed out, by address: what free(), record_stream() and the
// snapshot look up. Sharded by address hash, one lock per shard, so threads freeing
// different blocks rarely meet; each shard is an open-addressing table (linear probing,
// backward-shift deletion), so the hot path allocates no host memory once warm.
// Invariant: an address is in the map from the moment allocate returns it until its free
// is accepted -- a large block's until its pool has it back (Note [Frees in flight]);
// entries never overlap (the pools place blocks disjointly).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "core/spin_lock.hpp"
#include "core/stream_set.hpp"

namespace fragless::core {

struct slab;
class stream_shard;
class device_cache;

// Note [Live block size]
// Every allocation writes a live_block into the map and every free moves it out, and a
// deletion shifts the entries after it back a slot: the record is copied whole several
// times per allocation and free. The streams record_stream() adds are rare, so they live
// behind a pointer, null until the first: a record is 72 bytes where an inline stream set
// made it 160, and a new block's record starts with nothing to zero.
struct live_block {
  std::size_t size_bytes = 0;       // what the block occupies (class size or 512 B-rounded)
  std::size_t requested_bytes = 0;  // what the caller asked for
  stream_id stream = nullptr;       // allocation stream
  int device = 0;
  device_cache* cache = nullptr;    // the cache that placed it (the device's, or a private pool's)
  slab* owner = nullptr;            // small pool: its slab; large pool: nullptr
  stream_shard* shard = nullptr;    // small pool: the shard that owns the slab
  std::uint32_t slot = 0;
  bool freeing = false;             // large pool: its free has begun (Note [Frees in flight])
  // record_stream() uses; null until the first (Note [Live block size]).
  std::unique_ptr<stream_set> other_streams;
};

// Note [Frees in flight]
// A snapshot is taken under the device lock and must see every byte of the large pool as
// live, pending, free or a slab (check_snapshot). A large block used to leave the map at
// the start of its free, before its cache took the device lock to give it back, and to
// enter it after that lock was released at its allocation: a snapshot taken in between
// showed a hole where the block was (four threads allocating while another snapshots:
// one to four holes per run of the property test). So a large allocation enters the map
// before its cache releases the device lock, and a large free marks the entry (freeing)
// and leaves it there until its cache, under the device lock, has the block back: a
// snapshot shows it as a pending free meanwhile. A second free of the marked block finds
// no block, as it would after the free. Small blocks need neither: a slab's own slots say
// which objects are live (Note [Consistent snapshots]). The cost is a second lookup in the
// map per large free, under the device lock.
class live_block_map {
 public:
  live_block_map();
  // Hot path. May allocate host memory when a shard's table grows.
  void insert(std::uintptr_t address, live_block block);
  // Hot path of a free: the block starting at `address`, if any and not already being
  // freed. A small block is removed. Of a large one an entry stays, marked freeing, with
  // its size, allocation stream, device and cache, until its cache calls erase_freed
  // (Note [Frees in flight]). Either way the caller gets the whole record.
  std::optional<live_block> take_for_free(std::uintptr_t address) noexcept;
  // Removes the block at `address` that take_for_free marked, if it is there. Called with
  // the block's cache's device lock held.
  void erase_freed(std::uintptr_t address) noexcept;
  // Applies f(live_block&) to the block at `address` under its shard lock; false if absent
  // or being freed.
  template <typename F>
  bool update(std::uintptr_t address, F&& f) {
    shard& target = shard_for(address);
    std::lock_guard<spin_lock> lock(target.mutex);
    const std::size_t at = target.find(address);
    if (at == kNotFound || target.slots[at].block.freeing) return false;
    f(target.slots[at].block);
    return true;
  }
  // Visits every block, those being freed too: f(address, const live_block&). Locks
  // shards one at a time.
  template <typename F>
  void for_each(F&& f) const {
    for (const shard& one : shards_) {
      std::lock_guard<spin_lock> lock(one.mutex);
      for (const entry& slot : one.slots)
        if (slot.address != 0) f(slot.address, slot.block);
    }
  }
  // Visits every block for update: f(address, live_block&). Locks shards one at a time.
  template <typename F>
  void for_each_mutable(F&& f) {
    for (shard& one : shards_) {
      std::lock_guard<spin_lock> lock(one.mutex);
      for (entry& slot : one.slots)
        if (slot.address != 0) f(slot.address, slot.block);
    }
  }
  // The start of the block whose range contains `address` (slow: walks everything).
  std::optional<std::uintptr_t> containing(std::uintptr_t address) const;

 private:
  static constexpr std::size_t kShards = 64;
  static constexpr std::size_t kNotFound = SIZE_MAX;
  struct entry {
    std::uintptr_t address = 0;  // 0: empty
    live_block block;
  };
  struct alignas(64) shard {  // one cache line per lock: threads on different shards never meet
    mutable spin_lock mutex;
    std::vector<entry> slots;  // size is a power of two, at most half full
    std::size_t used = 0;
    std::size_t home(std::uintptr_t address) const noexcept {
      return static_cast<std::size_t>(((address >> 9) * 0x9E3779B97F4A7C15ull) >> 20) & (slots.size() - 1);
    }
    std::size_t find(std::uintptr_t address) const noexcept;
    void grow();
    void erase_at(std::size_t at) noexcept;
  };
  shard& shard_for(std::uintptr_t address) noexcept {
    // Blocks are 512 B aligned: drop those bits, then mix.
    const std::uint64_t key = (address >> 9) * 0x9E3779B97F4A7C15ull;
    return shards_[key >> 58];
  }
  std::array<shard, kShards> shards_;
};

}  // namespace fragless::core
