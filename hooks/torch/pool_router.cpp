// The pool router (see pool_router.hpp and Note [Pool use counts]).
#include "pool_router.hpp"

#include <c10/util/Exception.h>

#include <algorithm>

#include "fragless/fragless.hpp"

namespace fragless::torch {

std::uint64_t pool_router::route_slow(int device, cudaStream_t stream) {
  std::lock_guard lock(mutex_);
  for (auto at = routes_.rbegin(); at != routes_.rend(); ++at)
    if (at->device == device && at->filter(stream)) return at->pool;
  return 0;
}

pool_router::pool_entry& pool_router::entry_locked(int device, c10::MempoolId_t id) {
  auto found = pools_.find({device, id});
  TORCH_CHECK(found != pools_.end(), "fragless: no memory pool (", id.first, ", ", id.second, ") on device ",
              device, " (never created, or already released)");
  return found->second;
}

void pool_router::create_or_incref(int device, c10::MempoolId_t id) {
  std::lock_guard lock(mutex_);
  auto found = pools_.find({device, id});
  if (found != pools_.end()) {
    ++found->second.use_count;
    return;
  }
  pool_entry created;
  created.pool = fragless::create_pool(device);
  created.use_count = 1;
  names_[created.pool] = id;
  pools_.emplace(std::make_pair(device, id), created);
}

void pool_router::begin(int device, c10::MempoolId_t id, filter_fn filter) {
  create_or_incref(device, id);
  std::lock_guard lock(mutex_);
  for (const route_entry& route : routes_)
    TORCH_CHECK(!(route.device == device && route.id == id),
                "fragless: beginAllocateToPool: already routing allocations to memory pool (", id.first, ", ",
                id.second, ")");
  routes_.push_back(route_entry{device, id, entry_locked(device, id).pool, std::move(filter)});
  active_routes_.store(static_cast<int>(routes_.size()), std::memory_order_release);
}

void pool_router::end(int device, c10::MempoolId_t id) {
  std::lock_guard lock(mutex_);
  auto found = std::find_if(routes_.begin(), routes_.end(),
                            [&](const route_entry& route) { return route.device == device && route.id == id; });
  TORCH_CHECK(found != routes_.end(), "fragless: endAllocateToPool: not routing allocations to memory pool (",
              id.first, ", ", id.second, ")");
  routes_.erase(found);
  active_routes_.store(static_cast<int>(routes_.size()), std::memory_order_release);
}

void pool_router::release(int device, c10::MempoolId_t id) {
  std::uint64_t released = 0;
  {
    std::lock_guard lock(mutex_);
    pool_entry& entry = entry_locked(device, id);
    if (--entry.use_count > 0) return;
    released = entry.pool;
    pools_.erase({device, id});
  }
  fragless::release_pool(released);
}

int pool_router::use_count(int device, c10::MempoolId_t id) {
  std::lock_guard lock(mutex_);
  auto found = pools_.find({device, id});
  return found == pools_.end() ? 0 : found->second.use_count;
}

void pool_router::require(int device, c10::MempoolId_t id) {
  std::lock_guard lock(mutex_);
  entry_locked(device, id);
}

std::uint64_t pool_router::find(int device, c10::MempoolId_t id) {
  std::lock_guard lock(mutex_);
  auto found = pools_.find({device, id});
  return found == pools_.end() ? 0 : found->second.pool;
}

c10::MempoolId_t pool_router::mempool_of(std::uint64_t pool) {
  if (pool == 0) return {0, 0};
  std::lock_guard lock(mutex_);
  auto found = names_.find(pool);
  return found == names_.end() ? c10::MempoolId_t{0, 0} : found->second;
}

}  // namespace fragless::torch
