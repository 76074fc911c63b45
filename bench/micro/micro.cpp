// Host cost of libfragless's alloc+free pair on the cache-hit path (see micro.hpp).
// Measured through the public C++ API. On simcuda, simulated kernels are switched to
// auto-complete (found with dlsym, so the same binary runs on a real GPU too).
#include "micro.hpp"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "fragless/fragless.hpp"

namespace fragless::bench {
namespace {

struct micro_options {
  std::size_t size_bytes = 4096;
  long pairs = 200000;  // per repetition and thread
  int repetitions = 7;
  bool json = false;
  bool stats_stall = false;  // run_stats_stall instead
  std::size_t live_blocks = 20000;
  double seconds = 2.0;
};

bool parse(int argc, char** argv, micro_options& options) {
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* name) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "fragless-micro: %s needs a value\n", name);
        return nullptr;
      }
      return argv[++i];
    };
    if (arg == "--json") {
      options.json = true;
    } else if (arg == "--size") {
      const char* text = value("--size");
      if (text == nullptr) return false;
      options.size_bytes = std::strtoull(text, nullptr, 10);
    } else if (arg == "--pairs") {
      const char* text = value("--pairs");
      if (text == nullptr) return false;
      options.pairs = std::max(1L, std::strtol(text, nullptr, 10));
    } else if (arg == "--stats-stall") {
      options.stats_stall = true;
    } else if (arg == "--live") {
      const char* text = value("--live");
      if (text == nullptr) return false;
      options.live_blocks = std::max<std::size_t>(1, std::strtoull(text, nullptr, 10));
    } else if (arg == "--seconds") {
      const char* text = value("--seconds");
      if (text == nullptr) return false;
      options.seconds = std::max(0.1, std::strtod(text, nullptr));
    } else if (arg == "--reps") {
      const char* text = value("--reps");
      if (text == nullptr) return false;
      options.repetitions = std::max(1, std::atoi(text));
    } else if (arg == "--help" || arg == "-h") {
      std::printf(
          "usage: fragless-bench micro [--size BYTES] [--pairs N] [--reps N] [--json]\n"
          "  Host nanoseconds per alloc+free pair (cache hit), 1 thread and 2 threads on 2 streams.\n"
          "       fragless-bench micro --stats-stall [--live N] [--seconds S] [--json]\n"
          "  Free+allocate among N live blocks (default 20000) for S seconds (default 2) while\n"
          "  another thread reads the layout stats every 20 ms: how long a read holds them up.\n");
      return false;
    } else if (arg != "micro") {
      std::fprintf(stderr, "fragless-micro: unknown argument %s\n", arg.c_str());
      return false;
    }
  }
  return true;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t middle = values.size() / 2;
  return values.size() % 2 ? values[middle] : (values[middle - 1] + values[middle]) / 2.0;
}

std::int64_t thread_cpu_ns() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return std::int64_t{now.tv_sec} * 1000000000 + now.tv_nsec;
}

struct timing {
  double wall_ns;
  double cpu_ns;  // this thread's CPU time: the host cost, even on a busy machine
};

// Hot loop: pairs of allocate + deallocate.
timing run_pairs(std::size_t size_bytes, long pairs, void* stream) {
  const std::int64_t cpu_start = thread_cpu_ns();
  const auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < pairs; ++i) {
    void* block = fragless::allocate(size_bytes, 0, stream);
    fragless::deallocate(block);
  }
  const double wall = static_cast<double>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
  return {wall, static_cast<double>(thread_cpu_ns() - cpu_start)};
}

// A trivially parallel loop, one and two threads: how much two threads can gain on this
// machine right now (a busy or small machine caps the allocator's ratio too).
double machine_parallel_ratio() {
  auto spin = [] {
    volatile std::uint64_t sink = 0;
    std::uint64_t x = 1;
    for (int i = 0; i < 20000000; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
    sink = x;
    (void)sink;
  };
  auto wall = [&](int threads) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) workers.emplace_back(spin);
    for (auto& worker : workers) worker.join();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const double one = wall(1);
  return 2.0 * one / wall(2);
}

void enable_simcuda_auto_complete() {
  using set_fn = void (*)(int);
  if (auto set = reinterpret_cast<set_fn>(dlsym(RTLD_DEFAULT, "simcuda_set_auto_complete"))) set(1);
}

}  // namespace

int run_micro(int argc, char** argv) {
  micro_options options;
  if (!parse(argc, argv, options)) return 2;
  enable_simcuda_auto_complete();
  if (options.stats_stall) return run_stats_stall(options.live_blocks, options.seconds, options.json);
  cudaStream_t streams[2] = {nullptr, nullptr};
  for (cudaStream_t& stream : streams)
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
      std::fprintf(stderr, "fragless-micro: cannot create a stream\n");
      return 1;
    }
  try {
    // Warm up: the first pair creates the slab / maps the page; every later one is a hit.
    // A program this small places its first 65536 small requests exactly in the large pool
    // (Note [Exact start] in allocator/core/device_cache.cpp): warm up past them, so the
    // repetitions measure the slab hot path a long-running program lives on.
    run_pairs(options.size_bytes, 66000, streams[0]);
    run_pairs(options.size_bytes, 1000, streams[1]);
    std::vector<double> single_cpu, single_wall, double_cpu, ratios;
    for (int rep = 0; rep < options.repetitions; ++rep) {
      const timing single = run_pairs(options.size_bytes, options.pairs, streams[0]);
      single_cpu.push_back(single.cpu_ns / static_cast<double>(options.pairs));
      single_wall.push_back(single.wall_ns / static_cast<double>(options.pairs));
      // Two threads, two streams, started together.
      std::atomic<int> ready{0};
      std::atomic<bool> go{false};
      timing per_thread[2]{};
      std::vector<std::thread> threads;
      for (int t = 0; t < 2; ++t)
        threads.emplace_back([&, t] {
          ready.fetch_add(1);
          while (!go.load(std::memory_order_acquire)) {
          }
          per_thread[t] = run_pairs(options.size_bytes, options.pairs, streams[t]);
        });
      while (ready.load() < 2) {
      }
      const auto start = std::chrono::steady_clock::now();
      go.store(true, std::memory_order_release);
      for (auto& thread : threads) thread.join();
      const double wall = static_cast<double>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
      double_cpu.push_back((per_thread[0].cpu_ns + per_thread[1].cpu_ns) / 2.0 / static_cast<double>(options.pairs));
      // Pairs per second with two threads over pairs per second with one (wall clock).
      ratios.push_back((2.0 * static_cast<double>(options.pairs) / wall) /
                       (static_cast<double>(options.pairs) / single.wall_ns));
    }
    const double machine_ratio = machine_parallel_ratio();
    const double single = median(single_cpu);
    const double two = median(double_cpu);
    const double ratio = median(ratios);
    if (options.json) {
      std::printf(
          "{\"size_bytes\": %zu, \"pairs\": %ld, \"repetitions\": %d, \"pair_ns_median\": %.1f, "
          "\"pair_wall_ns_median\": %.1f, \"pair_ns_median_2threads\": %.1f, \"throughput_ratio_2threads\": %.2f, "
          "\"machine_parallel_ratio\": %.2f}\n",
          options.size_bytes, options.pairs, options.repetitions, single, median(single_wall), two, ratio,
          machine_ratio);
    } else {
      std::printf("alloc+free pair, %zu B, cache hit, median of %d x %ld pairs (thread CPU time)\n",
                  options.size_bytes, options.repetitions, options.pairs);
      std::printf("  1 thread,  1 stream : %8.1f ns per pair (wall %.1f)\n", single, median(single_wall));
      std::printf("  2 threads, 2 streams: %8.1f ns per pair per thread\n", two);
      std::printf("  2-thread throughput : %.2fx one thread (a trivially parallel loop gets %.2fx here now)\n",
                  ratio, machine_ratio);
    }
  } catch (const fragless::error& failure) {
    std::fprintf(stderr, "fragless-micro: %s\n", failure.what());
    return 1;
  }
  for (cudaStream_t stream : streams) cudaStreamDestroy(stream);
  return 0;
}

}  // namespace fragless::bench
