// The cudaMalloc-mode large pool (segment_pool) over a fake backend: the cached bytes it
// counts as blocks come and go (Note [Whole free segments]) against a walk of its segments
// and the blocks the test holds, after every operation, with and without the max split
// size rule, with releases of whole free segments in between.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>

#include "core/event_pool.hpp"
#include "core/segment_pool.hpp"
#include "fake_backend.hpp"

using namespace fragless;

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

// The bytes of the segments no live block lies in.
std::size_t walked_whole_free_bytes(const core::segment_pool& pool, const std::map<std::uintptr_t, std::size_t>& live) {
  std::size_t bytes = 0;
  for (const core::reserved_region& region : pool.reserved_regions()) {
    const auto inside = live.lower_bound(region.address);
    if (inside == live.end() || inside->first >= region.address + region.size_bytes) bytes += region.size_bytes;
  }
  return bytes;
}

}  // namespace

TEST_CASE("segment pool: the cached bytes counted as blocks come and go match a walk", "[segment_pool]") {
  for (const std::size_t max_split_bytes : {unlimited_bytes, 16 * kMiB}) {
    for (const std::uint64_t seed : {1, 2, 3}) {
      INFO("max_split_bytes " << max_split_bytes << ", seed " << seed);
      testing::fake_backend device_backend(std::uint64_t{64} << 30, false);
      core::event_pool events(device_backend, 0);
      core::cache_settings settings = core::cache_settings::for_backend(false);
      settings.conf.max_split_bytes = max_split_bytes;
      core::segment_pool pool(device_backend, 0, events, settings);
      std::mt19937_64 random(seed);
      std::map<std::uintptr_t, std::size_t> live;
      void* const streams[] = {nullptr, reinterpret_cast<void*>(std::uintptr_t{1})};
      std::size_t whole_free_seen = 0, releases = 0;
      for (int step = 0; step < 4000; ++step) {
        const auto choice = random() % 100;
        if (choice < 50 || live.empty()) {
          std::size_t size = 0;
          switch (random() % 3) {
            case 0: size = 512 * (1 + random() % 2048); break;   // up to 1 MiB: small segments
            case 1: size = 512 * (1 + random() % 20480); break;  // up to 10 MiB: large segments
            default: size = kMiB * (1 + random() % 40); break;   // up to 40 MiB: their own
          }
          std::uintptr_t address = 0;
          std::size_t placed_bytes = 0;
          REQUIRE(pool.allocate(size, streams[random() % 2], &address, &placed_bytes) == backend::status::ok);
          live.emplace(address, placed_bytes);
        } else if (choice < 95) {
          auto at = live.begin();
          std::advance(at, static_cast<long>(random() % live.size()));
          pool.release(at->first, at->second, core::stream_set(streams[random() % 2]));
          live.erase(at);
        } else {
          const std::size_t keep_bytes = (random() % 200) * kMiB;
          const std::size_t before = pool.reserved_bytes();
          pool.compact(core::compaction_pass{false, keep_bytes});
          releases += before != pool.reserved_bytes();
        }
        const std::size_t walked = walked_whole_free_bytes(pool, live);
        REQUIRE(pool.cached_free_bytes() == walked);
        whole_free_seen += walked > 0;
      }
      for (const auto& [address, size_bytes] : live) pool.release(address, size_bytes, core::stream_set(nullptr));
      live.clear();
      CHECK(pool.cached_free_bytes() == pool.reserved_bytes());
      pool.compact(core::compaction_pass{false, 0});
      CHECK(pool.cached_free_bytes() == 0);
      CHECK(pool.reserved_bytes() == 0);
      CHECK(whole_free_seen > 100);  // the walk found whole free segments often
      CHECK(releases > 10);          // and some went back to the device
    }
  }
}
