// The fake-backend fixture (one allocator over a fake_backend, checked with
// check_consistency) and the random-operation property loop that the fake-backend and the
// options tests both run: allocate on one of three streams, record_stream, flip whether
// events complete, maybe release the cache, free; consistency checked every 500 steps and
// after a full teardown. Invariant: the loop is a pure function of the seed and the mix, and
// after it nothing is live and every event has completed.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "consistency.hpp"
#include "core/allocator.hpp"
#include "fake_backend.hpp"
#include "test_scale.hpp"

namespace fragless::testing {

struct fake_fixture {
  fake_backend* device_backend;
  core::allocator instance;
  fake_fixture(std::uint64_t capacity_bytes, const core::cache_settings& settings)
      : device_backend(new fake_backend(capacity_bytes, settings.wants_vmm())),
        instance(std::unique_ptr<backend::backend>(device_backend), settings) {}
  core::device_cache& cache() { return instance.device(0); }
  void check() { check_consistency(cache().snapshot(), cache().stats()); }
};

inline void* stream_number(std::uintptr_t n) { return reinterpret_cast<void*>(n); }

// FRAGLESS_TEST_OPS, else `fallback` (a quarter of it under a sanitizer: Note [Sanitizer scale]).
inline int test_operations(int fallback) {
  const char* text = std::getenv("FRAGLESS_TEST_OPS");
  return text ? std::atoi(text) : for_build(fallback);
}

struct random_operation_mix {
  std::uint64_t seed = 1;
  int operations = 8000;
  std::uint64_t live_limit_bytes = std::uint64_t{1} << 30;  // above it, no new allocations
  std::size_t largest_mib = 40;     // the largest size class: 1..largest_mib MiB
  bool releases_cache = false;      // 1 operation in 100 calls release_cache
};

// Runs the mix on `f`, then frees everything, completes every event and releases the cache.
inline void run_random_operations(fake_fixture& f, bool vmm, const random_operation_mix& mix) {
  std::mt19937_64 random(mix.seed);
  std::vector<std::pair<void*, std::size_t>> live;
  std::size_t live_bytes = 0;
  for (int step = 0; step < mix.operations; ++step) {
    const auto choice = random() % 100;
    if ((choice < 55 && live_bytes < mix.live_limit_bytes) || live.empty()) {
      std::size_t size = 0;
      switch (random() % 4) {
        case 0: size = 1 + random() % 4096; break;
        case 1: size = 1 + random() % (64 * 1024); break;
        case 2: size = 64 * 1024 + random() % (4 << 20); break;
        default: size = (1 + random() % mix.largest_mib) << 20; break;
      }
      void* block = f.instance.allocate(size, 0, stream_number(1 + random() % 3));
      REQUIRE(block != nullptr);
      REQUIRE(reinterpret_cast<std::uintptr_t>(block) % 512 == 0);
      if (vmm) REQUIRE(f.device_backend->is_mapped(reinterpret_cast<std::uintptr_t>(block), size));
      live.push_back({block, size});
      live_bytes += size;
    } else if (choice < 60) {
      f.instance.record_stream(live[random() % live.size()].first, stream_number(1 + random() % 3));
    } else if (choice < (mix.releases_cache ? 61u : 62u)) {
      f.device_backend->events_complete = !f.device_backend->events_complete;
    } else if (choice < 62) {
      f.cache().release_cache(random() % 2 ? 0 : (64 << 20));
    } else {
      const std::size_t at = random() % live.size();
      f.instance.deallocate(live[at].first);
      live_bytes -= live[at].second;
      live[at] = live.back();
      live.pop_back();
    }
    if (step % 500 == 0) f.check();
  }
  f.check();
  for (auto& [block, size] : live) f.instance.deallocate(block);
  f.device_backend->events_complete = true;
  f.cache().release_cache(0);
  f.check();
}

}  // namespace fragless::testing
