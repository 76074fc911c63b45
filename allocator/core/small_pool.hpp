// The small pool: size-class slabs, one shard per (device, stream). A slab is one block
// of the large pool cut into equal objects of one class (Note [Size classes]); a shard
// serves only its own stream, so an object freed on stream S is reusable at once by S
// and by no other stream (Note [Stream reuse]).
// Invariants (per shard, under its lock): for every slab, live + |free_slots| == capacity;
// a slab is on its class's partial list iff it has a free slot; at most one slab per
// class is kept empty (the others go back to the large pool).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/event_pool.hpp"
#include "core/size_classes.hpp"
#include "core/spin_lock.hpp"
#include "core/stream_set.hpp"
#include "fragless/stats.hpp"

namespace fragless::core {

// Own cache lines: a slab's live count and free slots change on every allocation and free
// of its shard's thread; two shards' slabs side by side in host memory made two threads on
// two streams slower than one (the micro benchmark's 2-thread throughput fell to 0.9x).
struct alignas(64) slab {
  std::uintptr_t address = 0;
  std::size_t bytes = 0;
  std::uint32_t class_index = 0;
  std::uint32_t capacity = 0;
  std::uint32_t live = 0;  // objects handed out or pending free
  std::vector<std::uint32_t> free_slots;
  slab* previous = nullptr;  // partial-list links
  slab* next = nullptr;
  bool on_partial_list = false;
  // Handed out by free_object as surplus: whoever received it returns it to the large
  // pool; take_empty_slabs must not take it a second time.
  bool surplus = false;
  // The shard's release number when its last object was freed (0: never held one);
  // Note [Synchronized settle].
  std::uint64_t emptied_at_release = 0;
};

// An object freed while other streams may still use it: it rejoins its slab once every
// event recorded at free time completed.
struct pending_object {
  slab* owner;
  std::uint32_t slot;
  std::size_t size_bytes;
  std::vector<use_event> events;
  std::uint64_t freed_at_release;  // the shard's release number (Note [Synchronized settle])
};

// A small-pool counter of one shard. Written only under the shard's mutex (plain
// load + store, no read-modify-write), read without it by stats().
struct shard_stat {
  std::atomic<std::int64_t> current{0};
  std::atomic<std::int64_t> allocated{0};
  std::atomic<std::int64_t> freed{0};
  void add(std::int64_t amount) noexcept {
    current.store(current.load(std::memory_order_relaxed) + amount, std::memory_order_relaxed);
    allocated.store(allocated.load(std::memory_order_relaxed) + amount, std::memory_order_relaxed);
  }
  void subtract(std::int64_t amount) noexcept {
    current.store(current.load(std::memory_order_relaxed) - amount, std::memory_order_relaxed);
    freed.store(freed.load(std::memory_order_relaxed) + amount, std::memory_order_relaxed);
  }
};

// The per-allocation stats of the small pool, kept per shard so the hot path shares no
// counter between threads (Note [Stats pools] in device_cache_stats.cpp).
// One member per FRAGLESS_PER_ALLOCATION_STAT of core/stat_sources.def.
struct shard_stats {
#define FRAGLESS_PER_ALLOCATION_STAT(stat) shard_stat stat;
#include "core/stat_sources.def"
};

// The shards' per-allocation stats summed (current, allocated, freed), one member per
// FRAGLESS_PER_ALLOCATION_STAT.
struct small_pool_sums {
#define FRAGLESS_PER_ALLOCATION_STAT(name) stat name{};
#include "core/stat_sources.def"
};

// The shards' current per-allocation figures alone, in FRAGLESS_PER_ALLOCATION_STAT order:
// all that peaks and live counts read (Note [Peaks at a large allocation]).
inline constexpr std::size_t kPerAllocationStatCount = 0
#define FRAGLESS_PER_ALLOCATION_STAT(name) +1
#include "core/stat_sources.def"
    ;
using small_pool_currents = std::array<std::int64_t, kPerAllocationStatCount>;

class alignas(64) stream_shard {  // own cache lines: shards of different threads never share one
 public:
  explicit stream_shard(stream_id stream) : stream_(stream) {}
  ~stream_shard();
  stream_shard(const stream_shard&) = delete;
  stream_shard& operator=(const stream_shard&) = delete;

  stream_id stream() const noexcept { return stream_; }
  // Note [Retired streams]. Holds the device lock (every reader of stream() does).
  void rename_stream(stream_id to) noexcept { stream_ = to; }
  spin_lock& mutex() noexcept { return mutex_; }

  // ---- all below: the caller holds mutex() ----
  // Hot path: an object of the class from a partial slab. False when no slab has room.
  bool try_allocate(std::size_t class_index, std::uintptr_t* address, slab** owner, std::uint32_t* slot) noexcept {
    class_state& state = classes_[class_index];
    slab* target = state.partial_head;
    if (target == nullptr) return false;
    const std::uint32_t index = target->free_slots.back();
    target->free_slots.pop_back();
    if (target->live++ == 0) --state.empty_slabs;
    if (target->free_slots.empty()) unlink(state, target);
    *address = target->address + std::size_t{index} * class_size_bytes(class_index);
    *owner = target;
    *slot = index;
    return true;
  }
  // Hot path: gives an object back. Returns a slab that became surplus-empty (unlinked,
  // to be returned to the large pool by the caller after dropping the lock), or nullptr.
  slab* free_object(slab* owner, std::uint32_t slot) noexcept;

  // Adopts a new slab (memory from the large pool) for a class. Allocates host memory.
  void add_slab(std::unique_ptr<slab> fresh);
  // Unlinks and returns every empty slab (empty_cache / OOM).
  std::vector<std::unique_ptr<slab>> take_empty_slabs();
  // Takes a slab back out after free_object returned it.
  std::unique_ptr<slab> adopt_released(slab* released);

  std::vector<pending_object>& pending() noexcept { return pending_; }
  // Note [Synchronized settle]: releases (a pending free, a slab left empty) are numbered;
  // a synchronization covers those numbered up to the mark taken before it.
  std::uint64_t next_release() noexcept { return ++releases_; }
  void mark_synchronization() noexcept { synchronized_through_ = releases_; }
  bool covered_by_synchronization(std::uint64_t release) const noexcept { return release <= synchronized_through_; }
  shard_stats& counters() noexcept { return counters_; }
  std::size_t slab_count() const noexcept { return slabs_.size(); }
  // The doublings the next slab of a class takes (Note [Slab growth]): one per slab of the
  // class the shard holds, and never fewer than its largest slab of the class so far had.
  std::size_t class_slab_doublings(std::size_t class_index) const noexcept {
    const class_state& state = classes_[class_index];
    return std::max<std::size_t>(state.slab_count, state.most_slabs == 0 ? 0 : state.most_slabs - 1u);
  }
  std::size_t slab_bytes_total() const noexcept { return slab_bytes_; }
  template <typename F>
  void for_each_slab(F&& f) const {
    for (const auto& owned : slabs_) f(*owned);
  }

 private:
  struct class_state {
    slab* partial_head = nullptr;
    std::uint32_t empty_slabs = 0;
    std::uint32_t slab_count = 0;  // Note [Slab growth]
    std::uint32_t most_slabs = 0;  // the largest slab_count so far (Note [Slab growth])
  };
  void link(class_state& state, slab* target) noexcept;
  void unlink(class_state& state, slab* target) noexcept;
  std::unique_ptr<slab> remove_slab(slab* target);

  stream_id stream_;
  spin_lock mutex_;
  std::array<class_state, kClassCount> classes_{};
  std::vector<std::unique_ptr<slab>> slabs_;
  std::size_t slab_bytes_ = 0;
  std::vector<pending_object> pending_;
  std::uint64_t releases_ = 0;              // Note [Synchronized settle]
  std::uint64_t synchronized_through_ = 0;
  shard_stats counters_;
};

// Builds a slab object of `bytes` for `address` (host memory only).
std::unique_ptr<slab> make_slab(std::uintptr_t address, std::size_t class_index, std::size_t bytes);

}  // namespace fragless::core
