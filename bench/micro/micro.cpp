// Host cost of libfragless's alloc+free pair on the cache-hit path (see micro.hpp).
// Measured through the public C++ API. On simcuda, simulated kernels are switched to
// auto-complete (found with dlsym, so the same binary runs on a real GPU too).
#include "micro.hpp"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
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
    } else if (arg == "--reps") {
      const char* text = value("--reps");
      if (text == nullptr) return false;
      options.repetitions = std::max(1, std::atoi(text));
    } else if (arg == "--help" || arg == "-h") {
      std::printf(
          "usage: fragless-bench micro [--size BYTES] [--pairs N] [--reps N] [--json]\n"
          "  Host nanoseconds per alloc+free pair (cache hit), 1 thread and 2 threads on 2 streams.\n");
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

// Hot loop: pairs of allocate + deallocate; returns elapsed ns.
double run_pairs(std::size_t size_bytes, long pairs, void* stream) {
  const auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < pairs; ++i) {
    void* block = fragless::allocate(size_bytes, 0, stream);
    fragless::deallocate(block);
  }
  return static_cast<double>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
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
  cudaStream_t streams[2] = {nullptr, nullptr};
  for (cudaStream_t& stream : streams)
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
      std::fprintf(stderr, "fragless-micro: cannot create a stream\n");
      return 1;
    }
  try {
    // Warm up: the first pair creates the slab / maps the page; every later one is a hit.
    run_pairs(options.size_bytes, 1000, streams[0]);
    run_pairs(options.size_bytes, 1000, streams[1]);
    std::vector<double> single_ns, double_ns, ratios;
    for (int rep = 0; rep < options.repetitions; ++rep) {
      const double elapsed = run_pairs(options.size_bytes, options.pairs, streams[0]);
      single_ns.push_back(elapsed / static_cast<double>(options.pairs));
      // Two threads, two streams, started together; wall time over both.
      std::atomic<int> ready{0};
      std::atomic<bool> go{false};
      std::vector<std::thread> threads;
      for (int t = 0; t < 2; ++t)
        threads.emplace_back([&, t] {
          ready.fetch_add(1);
          while (!go.load(std::memory_order_acquire)) {
          }
          run_pairs(options.size_bytes, options.pairs, streams[t]);
        });
      while (ready.load() < 2) {
      }
      const auto start = std::chrono::steady_clock::now();
      go.store(true, std::memory_order_release);
      for (auto& thread : threads) thread.join();
      const double wall = static_cast<double>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
      // Per-pair cost as seen by each thread (wall / pairs per thread).
      double_ns.push_back(wall / static_cast<double>(options.pairs));
      ratios.push_back(2.0 * single_ns.back() / double_ns.back());
    }
    const double single = median(single_ns);
    const double two = median(double_ns);
    const double ratio = median(ratios);
    if (options.json) {
      std::printf(
          "{\"size_bytes\": %zu, \"pairs\": %ld, \"repetitions\": %d, \"pair_ns_median\": %.1f, "
          "\"pair_ns_median_2threads\": %.1f, \"throughput_ratio_2threads\": %.2f}\n",
          options.size_bytes, options.pairs, options.repetitions, single, two, ratio);
    } else {
      std::printf("alloc+free pair, %zu B, cache hit, median of %d x %ld pairs\n", options.size_bytes,
                  options.repetitions, options.pairs);
      std::printf("  1 thread,  1 stream : %8.1f ns per pair\n", single);
      std::printf("  2 threads, 2 streams: %8.1f ns per pair per thread (throughput %.2fx one thread)\n", two,
                  ratio);
    }
  } catch (const fragless::error& failure) {
    std::fprintf(stderr, "fragless-micro: %s\n", failure.what());
    return 1;
  }
  for (cudaStream_t stream : streams) cudaStreamDestroy(stream);
  return 0;
}

}  // namespace fragless::bench
