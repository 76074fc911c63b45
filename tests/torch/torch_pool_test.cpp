// fragless's private pools through c10's interface on simcuda: routing by filter, memory
// kept and counted as PyTorch counts it, a pool's unused memory usable outside it once
// memory runs out, IPC handles as second mappings, and pool checkpoints (CUDA graph trees).
#include <c10/core/Allocator.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "fragless/fragless.hpp"
#include "fragless/torch.hpp"
#include "simcuda/control.h"
#include "torch_allocator_test_support.hpp"

namespace {
namespace allocator = c10::cuda::CUDACachingAllocator;
using fragless::torch_test::kAll;
using fragless::torch_test::require_installed;
}  // namespace

TEST_CASE("torch allocator: private pools route by filter, keep their memory, count uses like PyTorch") {
  require_installed();
  const c10::MempoolId_t id{0, 4242};
  auto* adapter = allocator::get();
  adapter->createOrIncrefPool(0, id, nullptr);
  CHECK(adapter->getPoolUseCount(0, id) == 1);
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(false, 0);
  // Route only the side stream's allocations (as graph capture does with its capture id).
  const cudaStream_t routed = side.stream();
  adapter->beginAllocateToPool(0, id, [routed](cudaStream_t stream) { return stream == routed; });
  CHECK(adapter->getPoolUseCount(0, id) == 2);
  void* in_pool = adapter->raw_alloc_with_stream(3 << 20, routed);
  void* outside = adapter->raw_alloc_with_stream(3 << 20, nullptr);
  adapter->endAllocateToPool(0, id);
  CHECK(adapter->getPoolUseCount(0, id) == 2);  // end only stops routing
  void* after_end = adapter->raw_alloc_with_stream(1 << 20, routed);
  auto owner_of = [&](void* pointer, c10::MempoolId_t snapshot_id) {
    const auto address = reinterpret_cast<std::size_t>(pointer);
    for (const auto& segment : adapter->snapshot(snapshot_id, false).segments)
      if (address >= segment.address && address < segment.address + segment.total_size)
        return std::optional<c10::MempoolId_t>(segment.owner_private_pool_id);
    return std::optional<c10::MempoolId_t>();
  };
  CHECK(owner_of(in_pool, {0, 0}) == std::optional<c10::MempoolId_t>(id));
  CHECK(owner_of(outside, {0, 0}) == std::optional<c10::MempoolId_t>(c10::MempoolId_t{0, 0}));
  CHECK(owner_of(after_end, {0, 0}) == std::optional<c10::MempoolId_t>(c10::MempoolId_t{0, 0}));
  // A pool's snapshot has only its segments.
  CHECK(owner_of(in_pool, id).has_value());
  CHECK_FALSE(owner_of(outside, id).has_value());
  CHECK(adapter->checkPoolLiveAllocations(0, id, {in_pool}));
  CHECK_FALSE(adapter->checkPoolLiveAllocations(0, id, {}));
  CHECK_FALSE(adapter->checkPoolLiveAllocations(0, id, {in_pool, outside}));
  // Device stats count the pool's memory too.
  const auto stats = adapter->getDeviceStats(0);
  CHECK(stats.allocated_bytes[0].current == fragless::get_device_stats(0).allocated_bytes[fragless::pool_all].current);
  // Freed pool memory is not reused outside the pool.
  adapter->raw_delete(in_pool);
  void* reuse_attempt = adapter->raw_alloc_with_stream(3 << 20, routed);
  CHECK(owner_of(reuse_attempt, {0, 0}) == std::optional<c10::MempoolId_t>(c10::MempoolId_t{0, 0}));
  adapter->raw_delete(reuse_attempt);
  adapter->releasePool(0, id);
  CHECK(adapter->getPoolUseCount(0, id) == 1);
  adapter->releasePool(0, id);
  CHECK(adapter->getPoolUseCount(0, id) == 0);
  adapter->raw_delete(outside);
  adapter->raw_delete(after_end);
  CHECK_THROWS_AS(adapter->createOrIncrefPool(0, {0, 4343}, std::shared_ptr<allocator::CUDAAllocator>(
                                                                 adapter, [](allocator::CUDAAllocator*) {})),
                  c10::Error);
}

TEST_CASE("torch allocator: a pool's unused memory is usable outside it once memory runs out") {
  require_installed();
  auto* adapter = allocator::get();
  const c10::MempoolId_t id{0, 4444};
  adapter->createOrIncrefPool(0, id, nullptr);
  adapter->setUseOnOOM(0, id, true);
  const std::uint64_t capacity = simcuda_capacity(0);
  REQUIRE(simcuda_set_capacity(0, std::uint64_t{1} << 30) == 0);  // 1 GiB from now on
  adapter->beginAllocateToPool(0, id, [](cudaStream_t) { return true; });
  void* in_pool = adapter->raw_alloc_with_stream(700u << 20, nullptr);
  adapter->endAllocateToPool(0, id);
  adapter->raw_delete(in_pool);  // cached by the pool
  void* outside = adapter->raw_alloc_with_stream(700u << 20, nullptr);  // needs the pool's pages
  CHECK(outside != nullptr);
  CHECK(adapter->snapshot(id, false).segments.empty());  // the pool gave its memory back
  adapter->raw_delete(outside);
  adapter->releasePool(0, id);
  adapter->releasePool(0, id);
  adapter->emptyCache({0, 0});
  REQUIRE(simcuda_set_capacity(0, capacity) == 0);
}

TEST_CASE("torch allocator: IPC handles open as a second mapping of the same memory") {
  require_installed();
  auto* adapter = allocator::get();
  auto* block = static_cast<std::uint32_t*>(adapter->raw_alloc(3 << 20));
  for (std::uint32_t i = 0; i < (3u << 20) / 4; i += 1024) block[i] = i * 7;
  const allocator::ShareableHandle shared = adapter->shareIpcHandle(block);
  CHECK(shared.offset == 0);
  std::shared_ptr<void> first = adapter->getIpcDevPtr(shared.handle);
  std::shared_ptr<void> second = adapter->getIpcDevPtr(shared.handle);
  CHECK(first.get() == second.get());  // one mapping per handle
  CHECK(first.get() != static_cast<void*>(block));
  auto* seen = static_cast<std::uint32_t*>(first.get());
  bool same = true;
  for (std::uint32_t i = 0; i < (3u << 20) / 4; i += 1024) same = same && seen[i] == i * 7;
  CHECK(same);
  seen[1024] = 99;
  CHECK(block[1024] == 99);
  first.reset();
  second.reset();  // the mapping closes with the last holder
  adapter->raw_delete(block);
}

// One integer of fragless_torch_stats_json's output (Note [Stats JSON]), by flat key.
std::int64_t torch_stats_json_value(int device, const std::string& key) {
  std::string buffer(1 << 16, '\0');
  unsigned long needed = 0;
  REQUIRE(fragless_torch_stats_json(device, buffer.data(), buffer.size(), &needed) == 0);
  REQUIRE(needed <= buffer.size());
  const std::string quoted = "\"" + key + "\":";
  const std::size_t at = buffer.find(quoted);
  REQUIRE(at != std::string::npos);
  return std::stoll(buffer.substr(at + quoted.size()));
}

// Note [Pool checkpoints]: what CUDA graph trees rely on, at the c10 level.
TEST_CASE("torch allocator: checkpoint state restores a pool's live blocks in place, stats adjusted") {
  require_installed();
  const c10::MempoolId_t id{0, 5151};
  allocator::get()->createOrIncrefPool(0, id);
  const auto in_pool = [](cudaStream_t) { return true; };
  const auto allocated_now = [] { return allocator::getDeviceStats(0).allocated_bytes[kAll].current; };
  const auto pool_live = [&](std::unordered_set<void*> expected) {
    return allocator::get()->checkPoolLiveAllocations(0, id, expected);
  };
  allocator::beginAllocateToPool(0, id, in_pool);
  c10::DataPtr kept = allocator::get()->allocate(1u << 20);
  c10::DataPtr dies = allocator::get()->allocate(3000);
  allocator::endAllocateToPool(0, id);
  void* const kept_address = kept.get();
  void* const dies_address = dies.get();
  const auto allocated_at_checkpoint = allocated_now();
  auto state = allocator::getCheckpointState(0, id);
  REQUIRE(state != nullptr);

  dies.clear();  // freed after the checkpoint: the user sees it gone ...
  const auto dies_bytes = allocated_at_checkpoint - allocated_now();
  CHECK(dies_bytes >= 3000);
  // ... in fragless.stats() too (the C ABI it reads), which the core alone would not show.
  CHECK(fragless::get_device_stats(0).allocated_bytes[fragless::pool_all].current == allocated_at_checkpoint);
  CHECK(torch_stats_json_value(0, "allocated_bytes.all.current") == allocated_now());
  CHECK(torch_stats_json_value(0, "allocation.all.current") == allocator::getDeviceStats(0).allocation[kAll].current);
  CHECK(pool_live({kept_address}));
  bool listed_free = false;
  for (const auto& segment : allocator::snapshot(id).segments) {
    std::size_t offset = 0;
    for (const auto& block : segment.blocks) {
      if (segment.address + offset == reinterpret_cast<std::uintptr_t>(dies_address)) listed_free = !block.allocated;
      offset += block.size;
    }
  }
  CHECK(listed_free);
  allocator::beginAllocateToPool(0, id, in_pool);
  c10::DataPtr later = allocator::get()->allocate(5000);  // ... and its memory is not reused
  allocator::endAllocateToPool(0, id);
  CHECK(later.get() != dies_address);
  void* const later_address = later.get();

  auto delta = allocator::setCheckpointPoolState(0, state);
  // Every block live before the restore is freed; every block of the checkpoint is live again.
  std::unordered_set<void*> freed(delta.ptrs_freed.begin(), delta.ptrs_freed.end());
  CHECK(freed == std::unordered_set<void*>{kept_address, later_address});
  std::unordered_set<void*> allocd;
  for (const auto& data : delta.dataptrs_allocd) {
    allocd.insert(data.get());
    CHECK(data.get_deleter() == allocator::get()->raw_deleter());
  }
  CHECK(allocd == std::unordered_set<void*>{kept_address, dies_address});
  CHECK(pool_live({kept_address, dies_address}));
  CHECK(allocated_now() == allocated_at_checkpoint);
  // The old DataPtrs were taken over by the restore (graph trees drop their deleters).
  (void)kept.release_context();
  (void)later.release_context();
  // Restoring the same state again is a no-op for the live set.
  state.reset();  // the DataPtrs keep their blocks; nothing is held any more
  for (auto& data : delta.dataptrs_allocd) data.clear();
  CHECK(pool_live({}));
  CHECK(allocated_now() == allocated_at_checkpoint - (1 << 20) - dies_bytes);
  allocator::get()->releasePool(0, id);
}
