// PyTorch's private memory pools (torch.cuda.MemPool, CUDA graph capture) over fragless's
// pools: which MempoolId_t is which fragless pool, use counts, and which allocations are
// routed where. Invariant: an allocation goes to a pool exactly when, for its device, the
// most recently begun route whose filter accepts its stream names that pool (PyTorch's
// LIFO rule); with no route begun the hot path reads one atomic and returns.
//
// Note [Pool use counts]
// Same rules as PyTorch's allocator: createOrIncrefPool and beginAllocateToPool create the
// pool with use count 1 or add 1; endAllocateToPool only stops routing; releasePool takes 1
// off, and at 0 the fragless pool is released (its cached memory given back, blocks still
// live freeing into it later). Ids are per device (one adapter serves every device).
#pragma once

#include <c10/core/Allocator.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace fragless::torch {

class pool_router {
 public:
  using filter_fn = std::function<bool(cudaStream_t)>;

  // Hot path: the fragless pool for an allocation on (device, stream), or 0.
  std::uint64_t route(int device, cudaStream_t stream) {
    if (active_routes_.load(std::memory_order_acquire) == 0) return 0;
    return route_slow(device, stream);
  }

  void create_or_incref(int device, c10::MempoolId_t id);
  void begin(int device, c10::MempoolId_t id, filter_fn filter);  // @throws c10::Error (already routing)
  void end(int device, c10::MempoolId_t id);                       // @throws c10::Error (not routing)
  void release(int device, c10::MempoolId_t id);                   // @throws c10::Error (unknown pool)
  int use_count(int device, c10::MempoolId_t id);                  // 0 for unknown or released pools
  // Checks that the pool exists. @throws c10::Error
  void require(int device, c10::MempoolId_t id);
  // The fragless pool of a live pool id, or 0.
  std::uint64_t find(int device, c10::MempoolId_t id);
  // The MempoolId_t a fragless pool was created for ({0, 0} for the device's own cache).
  c10::MempoolId_t mempool_of(std::uint64_t pool);

 private:
  std::uint64_t route_slow(int device, cudaStream_t stream);
  struct pool_entry {
    std::uint64_t pool = 0;
    int use_count = 0;
  };
  struct route_entry {
    int device;
    c10::MempoolId_t id;
    std::uint64_t pool;
    filter_fn filter;
  };
  // Holds mutex_. @throws c10::Error for an unknown pool
  pool_entry& entry_locked(int device, c10::MempoolId_t id);

  std::mutex mutex_;  // guards everything below
  std::map<std::pair<int, c10::MempoolId_t>, pool_entry> pools_;
  std::unordered_map<std::uint64_t, c10::MempoolId_t> names_;  // every pool ever created
  std::vector<route_entry> routes_;
  std::atomic<int> active_routes_{0};
};

}  // namespace fragless::torch
