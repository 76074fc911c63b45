// Private pools on simcuda (Note [Private pools]): a pool's memory is never handed to an
// allocation outside it, and the device's memory never to the pool; data survives
// multi-stream traffic across pools with the race oracle watching; the device's stats are
// the sum over its caches and agree with the combined snapshot, whose segments carry
// their pool; a released pool refuses allocations, frees its blocks as usual and gives
// its cache to the next pool; memory cached by one cache is released when another runs
// out; empty_cache-style control reaches the pools; a stream first seen while it captures a
// graph gets pool memory without spoiling the capture.
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>
#include <simcuda/control.h>

#include <map>
#include <random>
#include <set>
#include <vector>

#include "backend/capture_aware_backend.hpp"
#include "consistency.hpp"
#include "simcuda_support.hpp"

using namespace fragless;
using namespace fragless::testing;

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

// Which cache's segment holds `address`: its pool tag, or -1 when no segment does.
std::int64_t owner_of(const memory_snapshot& snap, const void* pointer) {
  const auto address = reinterpret_cast<std::uint64_t>(pointer);
  for (const snapshot_segment& segment : snap.segments)
    if (address >= segment.address && address < segment.address + segment.size_bytes)
      return static_cast<std::int64_t>(segment.private_pool);
  return -1;
}

struct live_entry {
  std::size_t size_bytes;
  void* stream;
  std::uint64_t seed;
  std::uint64_t pool;  // 0: the device's cache
};

}  // namespace

TEST_CASE("pool blocks stay in their pool, device blocks outside it, under multi-stream traffic", "[pools]") {
  reset_simcuda();
  core::cache_settings settings;
  settings.exact_start_allocations = 0;  // slabs from the first request: small blocks are tested too
  auto instance = make_simcuda_allocator(settings);
  std::vector<void*> streams = {nullptr, create_stream(0), create_stream(0)};
  const std::vector<std::uint64_t> pools = {0, instance->create_pool(0), instance->create_pool(0)};
  REQUIRE(pools[1] != pools[2]);
  std::mt19937_64 random(11);
  std::map<void*, live_entry> live;
  std::uint64_t next_seed = 1;
  const long operations = operations_from_env(8000);
  for (long step = 0; step < operations; ++step) {
    const auto choice = random() % 100;
    void* stream = streams[random() % streams.size()];
    if (choice < 55 || live.empty()) {
      const std::uint64_t pool = pools[random() % pools.size()];
      const std::size_t bytes = random() % 3 == 0 ? 4 * kMiB + random() % (12 * kMiB) : 512 + random() % (256 * 1024);
      void* block = pool == 0 ? instance->allocate(bytes, 0, stream) : instance->allocate_from_pool(pool, bytes, stream);
      const std::uint64_t seed = next_seed++;
      fill_pattern(block, bytes, seed);
      simcuda_launch(stream, block, bytes, 1);
      live[block] = live_entry{bytes, stream, seed, pool};
    } else if (choice < 92) {
      auto at = live.begin();
      std::advance(at, static_cast<long>(random() % live.size()));
      if (random() % 4 == 0) {
        void* other = streams[random() % streams.size()];
        order_streams(other, at->second.stream);
        instance->record_stream(at->first, other);
        simcuda_launch(other, at->first, at->second.size_bytes, 0);
      }
      REQUIRE(check_pattern(at->first, at->second.size_bytes, at->second.seed));
      instance->deallocate(at->first);
      live.erase(at);
    } else if (choice < 97) {
      simcuda_advance(streams[random() % streams.size()], 1 + random() % 4);
    } else {
      // Every live block sits in a segment of the cache it came from.
      const memory_snapshot snap = instance->snapshot(0);
      for (const auto& [block, entry] : live) {
        INFO("block " << block << " from pool " << entry.pool);
        REQUIRE(owner_of(snap, block) == static_cast<std::int64_t>(entry.pool));
        REQUIRE(check_pattern(block, entry.size_bytes, entry.seed));
      }
    }
  }
  simcuda_complete_all();
  check_consistency(instance->snapshot(0), instance->device_stats_of(0, true));
  for (const auto& [block, entry] : live) {
    REQUIRE(check_pattern(block, entry.size_bytes, entry.seed));
    instance->deallocate(block);
  }
  INFO(race_report());
  CHECK(simcuda_race_count() == 0);
  for (void* stream : streams)
    if (stream != nullptr) destroy_stream(stream);
}

TEST_CASE("device stats are the sum over the device's caches and match the combined snapshot", "[pools]") {
  reset_simcuda();
  auto instance = make_simcuda_allocator(core::cache_settings{});
  const std::uint64_t pool = instance->create_pool(0);
  void* outside = instance->allocate(3 * kMiB, 0, nullptr);
  void* inside = instance->allocate_from_pool(pool, 5 * kMiB, nullptr);
  void* small_inside = instance->allocate_from_pool(pool, 4096, nullptr);
  const device_stats own = instance->device(0).stats();
  const device_stats of_pool = instance->pool_cache(pool).stats();
  const device_stats total = instance->device_stats_of(0, true);
  for (std::size_t kind : {std::size_t{pool_all}, std::size_t{pool_small}, std::size_t{pool_large}}) {
    CHECK(total.allocated_bytes[kind].current == own.allocated_bytes[kind].current + of_pool.allocated_bytes[kind].current);
    CHECK(total.reserved_bytes[kind].current == own.reserved_bytes[kind].current + of_pool.reserved_bytes[kind].current);
    CHECK(total.allocation[kind].current == own.allocation[kind].current + of_pool.allocation[kind].current);
  }
  CHECK(total.allocated_bytes[pool_all].current == static_cast<std::int64_t>(3 * kMiB + 5 * kMiB + 4096));
  CHECK(total.num_device_alloc == own.num_device_alloc + of_pool.num_device_alloc);
  const memory_snapshot snap = instance->snapshot(0);
  check_consistency(snap, total);
  CHECK(owner_of(snap, outside) == 0);
  CHECK(owner_of(snap, inside) == static_cast<std::int64_t>(pool));
  CHECK(owner_of(snap, small_inside) == static_cast<std::int64_t>(pool));
  instance->deallocate(outside);
  instance->deallocate(inside);
  instance->deallocate(small_inside);
  // Control calls reach the pool: releasing every cache leaves nothing reserved.
  instance->for_each_cache(0, [](core::device_cache& cache) { cache.release_cache(0); });
  CHECK(instance->device_stats_of(0, true).reserved_bytes[pool_all].current == 0);
}

TEST_CASE("a released pool refuses allocations, frees late blocks, and its cache serves the next pool", "[pools]") {
  reset_simcuda();
  auto instance = make_simcuda_allocator(core::cache_settings{});
  const std::uint64_t first = instance->create_pool(0);
  void* kept = instance->allocate_from_pool(first, 6 * kMiB, nullptr);
  instance->release_pool(first);
  CHECK_THROWS_AS(instance->allocate_from_pool(first, 1024, nullptr), invalid_argument_error);
  CHECK_THROWS_AS(instance->allocate_from_pool(987654, 1024, nullptr), invalid_argument_error);
  instance->release_pool(first);  // twice, or unknown: ignored
  // While a block of the released pool is live, its cache is not recycled.
  const std::uint64_t second = instance->create_pool(0);
  CHECK(&instance->pool_cache(second) != &instance->device(0));
  CHECK(owner_of(instance->snapshot(0), kept) == static_cast<std::int64_t>(first));  // not taken over
  instance->release_pool(second);
  instance->deallocate(kept);  // freed after its pool ended: back to the pool's cache
  simcuda_complete_all();
  const std::int64_t device_allocs_before = instance->device_stats_of(0, false).num_device_alloc;
  const std::uint64_t third = instance->create_pool(0);
  void* reused = instance->allocate_from_pool(third, 6 * kMiB, nullptr);
  // The recycled cache still had the pages: no new device memory.
  CHECK(instance->device_stats_of(0, false).num_device_alloc == device_allocs_before);
  CHECK(owner_of(instance->snapshot(0), reused) == static_cast<std::int64_t>(third));
  instance->deallocate(reused);
  instance->release_pool(third);
}

// Note [Capture underway]: a graph capture's stream is often new to the allocator (torch.cuda.graph
// captures on a stream of its own); its first allocations must not ask CUDA the stream's device,
// which a capturing stream refuses by spoiling the capture.
TEST_CASE("a stream first seen while it captures gets pool memory and the capture survives", "[pools]") {
  reset_simcuda();
  auto instance = make_simcuda_allocator(core::cache_settings{});
  cudaStream_t stream = static_cast<cudaStream_t>(create_stream(0));
  REQUIRE(stream != nullptr);
  const std::uint64_t pool = instance->create_pool(0);
  backend::enter_capture();
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  void* small = instance->allocate_from_pool(pool, 4000, stream);
  void* large = instance->allocate_from_pool(pool, 8 * kMiB, stream);
  cudaGraph_t graph = nullptr;
  CHECK(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
  backend::leave_capture();
  CHECK(graph != nullptr);
  if (graph != nullptr) cudaGraphDestroy(graph);
  CHECK(owner_of(instance->snapshot(0), small) == static_cast<std::int64_t>(pool));
  CHECK(owner_of(instance->snapshot(0), large) == static_cast<std::int64_t>(pool));
  instance->deallocate(small);
  instance->deallocate(large);
  instance->release_pool(pool);
  cudaStreamDestroy(stream);
}

TEST_CASE("memory cached by one cache is released when another runs out", "[pools]") {
  reset_simcuda();
  REQUIRE(simcuda_set_capacity(0, 64 * kMiB) == 0);
  auto instance = make_simcuda_allocator(core::cache_settings{});
  const std::uint64_t pool = instance->create_pool(0);
  // The pool caches 40 MiB, freed: the device's own cache needs 40 MiB of 64.
  void* in_pool = instance->allocate_from_pool(pool, 40 * kMiB, nullptr);
  instance->deallocate(in_pool);
  CHECK(instance->pool_cache(pool).stats().reserved_bytes[pool_all].current >= static_cast<std::int64_t>(40 * kMiB));
  void* outside = instance->allocate(40 * kMiB, 0, nullptr);
  CHECK(instance->pool_cache(pool).stats().reserved_bytes[pool_all].current == 0);
  // And the other way round: the pool gets the device cache's memory back.
  instance->deallocate(outside);
  void* back_in_pool = instance->allocate_from_pool(pool, 40 * kMiB, nullptr);
  instance->deallocate(back_in_pool);
  // Live memory is not released: both at once do not fit, and the error is PyTorch's.
  void* held = instance->allocate_from_pool(pool, 40 * kMiB, nullptr);
  try {
    instance->allocate(40 * kMiB, 0, nullptr);
    FAIL("expected out of memory");
  } catch (const out_of_memory_error& oom) {
    CHECK(std::string(oom.what()).rfind("CUDA out of memory. Tried to allocate ", 0) == 0);
  }
  instance->deallocate(held);
  REQUIRE(simcuda_set_capacity(0, std::uint64_t{80} << 30) == 0);
}
