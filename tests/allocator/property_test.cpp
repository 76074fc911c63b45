// Property tests on simcuda: many random alloc / free / record_stream operations over
// several streams and threads, with simulated kernels touching live blocks. Checked:
// every block keeps the pattern written into it until its free (so no two live blocks
// overlap), blocks are 512 B aligned and accessible device memory, every stat matches a
// full walk of the snapshot, the race oracle sees nothing, and after freeing everything
// and empty_cache the device is back to its starting usage.
// FRAGLESS_TEST_OPS sets the operations per thread (default keeps CI fast).
#include <catch2/catch.hpp>

#include <simcuda/control.h>

#include <atomic>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "consistency.hpp"
#include "simcuda_support.hpp"

using namespace fragless;
using namespace fragless::testing;

namespace {

struct live_entry {
  void* block;
  std::size_t size;
  std::uint64_t seed;
  void* stream;  // allocation stream
};

std::size_t random_size(std::mt19937_64& random) {
  switch (random() % 8) {
    case 0: return random() % 600;                          // tiny, including 0
    case 1: case 2: return 1 + random() % (64 * 1024);       // size classes
    case 3: case 4: return 64 * 1024 + random() % (2 << 20);  // large, sub-page
    case 5: return (1 << 20) + random() % (4 << 20);         // 1-5 MiB: page tails
    case 6: return (4 << 20) + random() % (28 << 20);
    default: return 512 * (1 + random() % 64);
  }
}

// One worker: its own streams, a shared pool of blocks handed between threads.
void run_worker(core::allocator& instance, int thread_index, long operations, std::vector<void*> streams,
                std::mutex& shared_mutex, std::vector<live_entry>& shared, std::atomic<long>& failures) {
  std::mt19937_64 random(1234 + thread_index);
  std::vector<live_entry> mine;
  std::size_t mine_bytes = 0;
  auto release = [&](live_entry entry) {
    if (entry.block != nullptr && !check_pattern(entry.block, entry.size, entry.seed)) ++failures;
    instance.deallocate(entry.block);
  };
  for (long step = 0; step < operations; ++step) {
    const auto choice = random() % 100;
    void* stream = streams[random() % streams.size()];
    if ((choice < 50 && mine_bytes < (256u << 20)) || mine.empty()) {
      const std::size_t size = random_size(random);
      void* block = instance.allocate(size, 0, stream);
      if (size == 0) {
        if (block != nullptr) ++failures;
        continue;
      }
      if (block == nullptr || reinterpret_cast<std::uintptr_t>(block) % 512 != 0 ||
          !simcuda_is_accessible(block, size))
        ++failures;
      const std::uint64_t seed = random();
      fill_pattern(block, size, seed);
      // A kernel on the allocation stream writes the block (stream-ordered use).
      simcuda_launch(stream, block, size, 1);
      mine.push_back({block, size, seed, stream});
      mine_bytes += size;
    } else if (choice < 58) {
      // Use on another stream, declared with record_stream.
      live_entry& entry = mine[random() % mine.size()];
      void* other = streams[random() % streams.size()];
      instance.record_stream(entry.block, other);
      order_streams(other, entry.stream);  // the program orders its own use after the write
      simcuda_launch(other, entry.block, entry.size, 0);
    } else if (choice < 62) {
      // Hand a block to another thread (freed there).
      const std::size_t at = random() % mine.size();
      mine_bytes -= mine[at].size;
      std::lock_guard<std::mutex> lock(shared_mutex);
      shared.push_back(mine[at]);
      mine[at] = mine.back();
      mine.pop_back();
    } else if (choice < 66) {
      live_entry entry{nullptr, 0, 0, nullptr};
      {
        std::lock_guard<std::mutex> lock(shared_mutex);
        if (!shared.empty()) {
          entry = shared.back();
          shared.pop_back();
        }
      }
      if (entry.block != nullptr) release(entry);
    } else if (choice < 70) {
      simcuda_advance(stream, 1 + random() % 4);
    } else {
      const std::size_t at = random() % mine.size();
      mine_bytes -= mine[at].size;
      release(mine[at]);
      mine[at] = mine.back();
      mine.pop_back();
    }
  }
  for (live_entry& entry : mine) release(entry);
}

void run_property(const core::cache_settings& settings, int threads, long operations) {
  const bool use_vmm = settings.wants_vmm();
  reset_simcuda();
  const std::uint64_t used_before = simcuda_used_bytes(0);
  auto instance = make_simcuda_allocator(settings);
  core::device_cache& cache = instance->device(0);
  CHECK(std::string(cache.backend_name()) == (use_vmm ? "vmm" : "cudaMalloc"));
  std::vector<void*> streams;
  for (int i = 0; i < 2 * threads; ++i) streams.push_back(create_stream(0));
  streams.push_back(nullptr);  // the legacy default stream too
  std::mutex shared_mutex;
  std::vector<live_entry> shared;
  std::atomic<long> failures{0};
  // Phase 1: one thread, full consistency check every few hundred operations.
  {
    std::mt19937_64 random(99);
    for (int round = 0; round < 20; ++round) {
      run_worker(*instance, 100 + round, operations / 20, streams, shared_mutex, shared, failures);
      check_consistency(cache.snapshot(), cache.stats());
    }
  }
  // Phase 2: several threads at once, shared blocks crossing threads -- and snapshots
  // taken meanwhile (the stats publisher's layout refresh), each a well-formed layout:
  // blocks exactly covering disjoint segments (Note [Snapshot outside the lock]).
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    std::vector<void*> own{streams[2 * t], streams[2 * t + 1], nullptr};
    workers.emplace_back(run_worker, std::ref(*instance), t, operations, own, std::ref(shared_mutex),
                         std::ref(shared), std::ref(failures));
  }
  std::atomic<bool> workers_done{false};
  std::vector<std::string> snapshot_problems;
  int snapshots_taken = 0;
  std::thread snapshot_reader([&] {
    while (!workers_done.load() && snapshot_problems.empty()) {
      std::vector<std::string> problems = check_snapshot(cache.snapshot());
      snapshot_problems.insert(snapshot_problems.end(), problems.begin(), problems.end());
      ++snapshots_taken;
    }
  });
  for (auto& worker : workers) worker.join();
  workers_done = true;
  snapshot_reader.join();
  INFO("snapshots taken during phase 2: " << snapshots_taken);
  CHECK(snapshot_problems == std::vector<std::string>{});
  check_consistency(cache.snapshot(), cache.stats());
  for (live_entry& entry : shared) {
    if (!check_pattern(entry.block, entry.size, entry.seed)) ++failures;
    instance->deallocate(entry.block);
  }
  CHECK(failures.load() == 0);
  INFO(race_report());
  CHECK(simcuda_race_count() == 0);
  check_consistency(cache.snapshot(), cache.stats());
  const device_stats stats = cache.stats();
  CHECK(stats.allocated_bytes[pool_all].current == 0);
  CHECK(stats.allocation[pool_all].allocated > operations);
  CHECK(stats.reserved_bytes[pool_all].peak > 0);
  cache.release_cache(0);
  check_consistency(cache.snapshot(), cache.stats());
  CHECK(cache.stats().reserved_bytes[pool_all].current == 0);
  CHECK(simcuda_used_bytes(0) == used_before);
  CHECK(simcuda_race_count() == 0);
  simcuda_complete_all();
  for (void* stream : streams)
    if (stream != nullptr) destroy_stream(stream);
}

}  // namespace

TEST_CASE("property: VMM backend, random operations over threads and streams", "[property][vmm]") {
  run_property(core::cache_settings::for_backend(true), 4, operations_from_env(8000));
}

TEST_CASE("property: cudaMalloc backend, random operations over threads and streams", "[property][cudamalloc]") {
  run_property(core::cache_settings::for_backend(false), 4, operations_from_env(8000));
}

// The cache options release memory early (without synchronizing) and split differently:
// the same properties must hold, with no race on memory released while in use.
TEST_CASE("property: cache options on, random operations over threads and streams", "[property][options]") {
  for (bool vmm : {true, false}) {
    INFO("vmm " << vmm);
    core::cache_settings settings = core::cache_settings::for_backend(vmm);
    settings.conf.release_threshold_bytes = 8u << 20;
    settings.conf.max_cached_bytes = std::size_t{3} << 30;  // allowed memory: the collection starts at 614 MiB
    settings.conf.garbage_collection_threshold = 0.2;
    settings.conf.max_split_bytes = 20u << 20;
    settings.conf.dedicated_mapping_threshold_bytes = 4u << 20;
    settings.conf.large_segment_bytes = 8u << 20;
    run_property(settings, 4, operations_from_env(8000) / 2);
  }
}
