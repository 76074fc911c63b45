// Checkpoint state of private pools for torch.compile's CUDA graph trees
// (CUDAAllocator::getCheckpointState / setCheckpointPoolState).
// Invariant: a block named by a live checkpoint state is never given back to fragless while
// that state exists: freeing it only marks it held (its memory stays at its address, out of
// the stats and snapshots the user sees), so a restore can hand it out again, in place.
//
// Note [Pool checkpoints]
// A graph tree records a graph, checkpoints the pool (the live blocks and their
// addresses), and later restores that checkpoint to record a sibling graph that must find
// the same blocks live at the same addresses. PyTorch's allocator re-creates the blocks by
// replaying the pool's block layout; fragless cannot place a block at a chosen address, so
// instead it never lets go of a checkpointed block while a state names it:
//  - getCheckpointState: the pool's live blocks (address, size, requested size, small or
//    large), from fragless's snapshot, held ones left out.
//  - a free of a block some live state names marks it held: the user sees it freed
//    (memory_allocated, memory_stats, snapshots, checkPoolLiveAllocations leave it out),
//    fragless still has it allocated.
//  - setCheckpointPoolState: every block of the pool live now is freed (ptrs_freed, as in
//    PyTorch), then every block of the state is live again at its address (held ones taken
//    back, still-live ones kept) and gets a fresh DataPtr (dataptrs_allocd).
//  - when the last state naming a held block goes away, the block goes back to fragless.
// Cost: memory of held blocks is not reused until their states die (PyTorch reuses it
// between recordings); a graph tree keeps its checkpoints as long as the tree lives.
#pragma once

#include <c10/cuda/CUDACachingAllocator.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "fragless/fragless.hpp"

namespace fragless::torch {

class pool_checkpoints {
 public:
  struct block {
    std::uintptr_t address = 0;
    std::size_t size_bytes = 0;
    std::size_t requested_bytes = 0;
    pool_kind kind = pool_large;
  };
  // A checkpoint: what getCheckpointState hands PyTorch.
  struct state final : c10::cuda::CUDACachingAllocator::AllocatorState {
    ~state() override;
    pool_checkpoints* owner = nullptr;
    int device = 0;
    c10::MempoolId_t id{0, 0};
    std::uint64_t pool = 0;
    std::vector<block> live;
  };
  struct restore_result {
    std::vector<void*> freed;       // live before the restore; the caller frees those not in `allocated`
    std::vector<void*> allocated;   // live after the restore: the state's blocks
  };

  // The pool's live blocks now. @throws fragless::error
  std::shared_ptr<state> take(int device, c10::MempoolId_t id, std::uint64_t pool);
  // Restores `checkpoint`: takes back its held blocks. The caller frees result.freed minus
  // result.allocated through its usual free path (which holds or deallocates them).
  // @throws c10::Error (a block of the state is neither live nor held: not reachable)
  restore_result restore(const state& checkpoint);
  // Free path: true when the block is now held (the caller must not deallocate it).
  // Hot path: one relaxed load while no checkpoint exists.
  bool hold_on_free(void* pointer) noexcept {
    if (states_.load(std::memory_order_relaxed) == 0) return false;
    return hold_slow(pointer);
  }
  bool is_held(std::uintptr_t address) const;
  bool any_held() const noexcept { return held_count_.load(std::memory_order_relaxed) != 0; }
  // Takes held blocks out of allocated / active / requested current figures.
  void leave_held_out(device_stats& stats, int device) const;

 private:
  struct named_block {
    block info;
    int device = 0;
    int states = 0;     // live states naming it
    bool held = false;  // freed by the user, still allocated in fragless
  };
  bool hold_slow(void* pointer) noexcept;
  void forget(const state& checkpoint) noexcept;  // a state's destructor

  mutable std::mutex mutex_;  // guards blocks_
  std::unordered_map<std::uintptr_t, named_block> blocks_;
  std::atomic<std::size_t> states_{0};
  std::atomic<std::size_t> held_count_{0};
};

}  // namespace fragless::torch
