// Checkpoints of private pools (see pool_checkpoints.hpp, Note [Pool checkpoints]).
#include "pool_checkpoints.hpp"

#include <c10/util/Exception.h>

#include <algorithm>

namespace fragless::torch {

pool_checkpoints::state::~state() {
  if (owner != nullptr) owner->forget(*this);
}

std::shared_ptr<pool_checkpoints::state> pool_checkpoints::take(int device, c10::MempoolId_t id, std::uint64_t pool) {
  auto checkpoint = std::make_shared<state>();
  checkpoint->device = device;
  checkpoint->id = id;
  checkpoint->pool = pool;
  const memory_snapshot snap = fragless::snapshot(device);
  std::lock_guard lock(mutex_);
  for (const snapshot_segment& segment : snap.segments) {
    if (segment.private_pool != pool) continue;
    for (const snapshot_block& one : segment.blocks) {
      if (one.state != block_state::allocated) continue;
      const auto address = static_cast<std::uintptr_t>(one.address);
      auto found = blocks_.find(address);
      if (found != blocks_.end() && found->second.held) continue;  // freed, as far as the user knows
      checkpoint->live.push_back(block{address, static_cast<std::size_t>(one.size_bytes),
                                       static_cast<std::size_t>(one.requested_bytes), segment.pool});
    }
  }
  for (const block& one : checkpoint->live) {
    named_block& named = blocks_[one.address];
    named.info = one;
    named.device = device;
    ++named.states;
  }
  checkpoint->owner = this;
  states_.fetch_add(1, std::memory_order_relaxed);
  return checkpoint;
}

pool_checkpoints::restore_result pool_checkpoints::restore(const state& checkpoint) {
  restore_result result;
  const memory_snapshot snap = fragless::snapshot(checkpoint.device);
  std::lock_guard lock(mutex_);
  // Every block of the pool the user holds now is freed (PyTorch frees them all).
  for (const snapshot_segment& segment : snap.segments) {
    if (segment.private_pool != checkpoint.pool) continue;
    for (const snapshot_block& one : segment.blocks) {
      if (one.state != block_state::allocated) continue;
      const auto address = static_cast<std::uintptr_t>(one.address);
      auto found = blocks_.find(address);
      if (found != blocks_.end() && found->second.held) continue;
      result.freed.push_back(reinterpret_cast<void*>(address));
    }
  }
  // Every block of the state is live again, where it was.
  for (const block& one : checkpoint.live) {
    auto found = blocks_.find(one.address);
    TORCH_CHECK(found != blocks_.end(), "fragless: setCheckpointPoolState: block ", one.address,
                " of the checkpoint is not known (Note [Pool checkpoints])");
    const bool live_now = std::find(result.freed.begin(), result.freed.end(),
                                    reinterpret_cast<void*>(one.address)) != result.freed.end();
    TORCH_CHECK(live_now || found->second.held, "fragless: setCheckpointPoolState: block ", one.address,
                " of the checkpoint is neither live nor held (Note [Pool checkpoints])");
    if (found->second.held) {
      found->second.held = false;
      held_count_.fetch_sub(1, std::memory_order_relaxed);
    }
    result.allocated.push_back(reinterpret_cast<void*>(one.address));
  }
  return result;
}

bool pool_checkpoints::hold_slow(void* pointer) noexcept {
  std::lock_guard lock(mutex_);
  auto found = blocks_.find(reinterpret_cast<std::uintptr_t>(pointer));
  if (found == blocks_.end() || found->second.states == 0 || found->second.held) return false;
  found->second.held = true;
  held_count_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool pool_checkpoints::is_held(std::uintptr_t address) const {
  if (!any_held()) return false;
  std::lock_guard lock(mutex_);
  auto found = blocks_.find(address);
  return found != blocks_.end() && found->second.held;
}

void pool_checkpoints::leave_held_out(device_stats& stats, int device) const {
  if (!any_held()) return;
  std::lock_guard lock(mutex_);
  for (const auto& [address, named] : blocks_) {
    if (!named.held || named.device != device) continue;
    const auto size = static_cast<std::int64_t>(named.info.size_bytes);
    for (const pool_kind kind : {pool_all, named.info.kind}) {
      stats.allocated_bytes[kind].current -= size;
      stats.active_bytes[kind].current -= size;
      stats.requested_bytes[kind].current -= static_cast<std::int64_t>(named.info.requested_bytes);
      stats.allocation[kind].current -= 1;
      stats.active[kind].current -= 1;
    }
  }
}

void pool_checkpoints::forget(const state& checkpoint) noexcept {
  std::vector<void*> released;
  {
    std::lock_guard lock(mutex_);
    for (const block& one : checkpoint.live) {
      auto found = blocks_.find(one.address);
      if (found == blocks_.end() || --found->second.states > 0) continue;
      if (found->second.held) {
        released.push_back(reinterpret_cast<void*>(one.address));
        held_count_.fetch_sub(1, std::memory_order_relaxed);
      }
      blocks_.erase(found);
    }
    states_.fetch_sub(1, std::memory_order_relaxed);
  }
  for (void* pointer : released) {
    try {
      fragless::deallocate(pointer);  // its last state is gone: the block goes back
    } catch (...) {
      // Not reachable (held blocks are fragless's live blocks); a free path never throws.
    }
  }
}

}  // namespace fragless::torch
