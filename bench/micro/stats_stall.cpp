// How long a layout stats read stops allocations (see micro.hpp): one thread keeps freeing
// and allocating among N live blocks while another reads the stats with their layout
// figures (get_device_stats, what the stats publisher does once a second) every 20 ms.
// Invariant: every block allocated here is freed before it returns.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "fragless/fragless.hpp"
#include "micro.hpp"

namespace fragless::bench {
namespace {

using clock_type = std::chrono::steady_clock;

double micros_since(clock_type::time_point start) {
  return std::chrono::duration<double, std::micro>(clock_type::now() - start).count();
}

double quantile(const std::vector<double>& sorted, double q) {
  return sorted.empty() ? 0.0 : sorted[std::min(sorted.size() - 1, static_cast<std::size_t>(q * static_cast<double>(sorted.size())))];
}

// A third of the blocks 1-9 MiB (large pool), two thirds 512 B-60 KiB (mostly slabs).
std::size_t block_bytes(std::mt19937_64& random, std::size_t index) {
  return index % 3 == 0 ? (std::size_t{1} << 20) + random() % (std::size_t{8} << 20) : 512 + random() % (60 << 10);
}

}  // namespace

int run_stats_stall(std::size_t live_blocks, double seconds, bool json) {
  std::mt19937_64 random(1);
  std::vector<void*> live;
  try {
    for (std::size_t i = 0; i < live_blocks; ++i) live.push_back(fragless::allocate(block_bytes(random, i), 0, nullptr));
  } catch (const fragless::error& failure) {
    std::fprintf(stderr, "fragless-micro: %zu live blocks: %s\n", live.size(), failure.what());
    for (void* block : live) fragless::deallocate(block);
    return 1;
  }
  std::atomic<bool> stop{false};
  std::vector<double> read_us;
  std::thread reader([&] {
    while (!stop.load()) {
      const auto start = clock_type::now();
      const device_stats stats = fragless::get_device_stats(0);
      read_us.push_back(micros_since(start));
      (void)stats;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  std::vector<double> pair_us;
  const auto end = clock_type::now() + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(seconds));
  int status = 0;
  try {
    for (std::size_t k = 0; clock_type::now() < end; ++k) {
      const std::size_t index = random() % live.size();
      const auto start = clock_type::now();
      fragless::deallocate(live[index]);
      live[index] = nullptr;
      live[index] = fragless::allocate(block_bytes(random, k), 0, nullptr);
      pair_us.push_back(micros_since(start));
    }
  } catch (const fragless::error& failure) {
    std::fprintf(stderr, "fragless-micro: %s\n", failure.what());
    status = 1;
  }
  stop = true;
  reader.join();
  for (void* block : live)
    if (block != nullptr) fragless::deallocate(block);
  std::sort(pair_us.begin(), pair_us.end());
  std::sort(read_us.begin(), read_us.end());
  if (json) {
    std::printf(
        "{\"live_blocks\": %zu, \"pairs\": %zu, \"pair_us_median\": %.2f, \"pair_us_p999\": %.1f, "
        "\"pair_us_max\": %.1f, \"stats_reads\": %zu, \"stats_read_us_median\": %.0f, \"stats_read_us_max\": %.0f}\n",
        live_blocks, pair_us.size(), quantile(pair_us, 0.5), quantile(pair_us, 0.999),
        pair_us.empty() ? 0.0 : pair_us.back(), read_us.size(), quantile(read_us, 0.5),
        read_us.empty() ? 0.0 : read_us.back());
  } else {
    std::printf("free+allocate among %zu live blocks for %.1f s, layout stats read every 20 ms\n", live_blocks, seconds);
    std::printf("  pairs: %zu; us per pair median %.2f, 99.9th %.1f, longest %.1f\n", pair_us.size(),
                quantile(pair_us, 0.5), quantile(pair_us, 0.999), pair_us.empty() ? 0.0 : pair_us.back());
    std::printf("  stats reads: %zu; us per read median %.0f, longest %.0f\n", read_us.size(), quantile(read_us, 0.5),
                read_us.empty() ? 0.0 : read_us.back());
  }
  return status;
}

}  // namespace fragless::bench
