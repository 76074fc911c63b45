// fragless-demo: a small program that uses libfragless the way a training job would --
// weights that stay, activations of varying size that come and go on two streams -- then
// prints memory_summary. With --hold SECONDS it keeps its memory while fragless-stats looks
// at it from another terminal:
//   scripts/with-simcuda build/default/tools/fragless-demo/fragless-demo --hold 30 &
//   scripts/with-simcuda build/default/tools/fragless-stats/fragless-stats
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fragless/fragless.hpp"

namespace {

struct arguments {
  int steps = 20;
  double hold_seconds = 0;
  bool quiet = false;
};

arguments parse(int argc, char** argv) {
  arguments parsed;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--steps" && i + 1 < argc) {
      parsed.steps = std::atoi(argv[++i]);
    } else if (flag == "--hold" && i + 1 < argc) {
      parsed.hold_seconds = std::atof(argv[++i]);
    } else if (flag == "--quiet") {
      parsed.quiet = true;
    } else {
      std::fprintf(stderr,
                   "usage: fragless-demo [--steps N] [--hold SECONDS] [--quiet]\n"
                   "Allocates like a small training loop through fragless and prints memory_summary.\n");
      std::exit(flag == "--help" || flag == "-h" ? 0 : 2);
    }
  }
  return parsed;
}

}  // namespace

int main(int argc, char** argv) {
  const arguments args = parse(argc, argv);
  try {
    cudaStream_t side_stream = nullptr;
    if (cudaStreamCreateWithFlags(&side_stream, cudaStreamNonBlocking) != cudaSuccess) {
      std::fprintf(stderr, "fragless-demo: no CUDA device (run it with scripts/with-simcuda)\n");
      return 1;
    }
    std::mt19937_64 random(7);
    std::vector<void*> weights;
    for (int layer = 0; layer < 24; ++layer) weights.push_back(fragless::allocate((3 + layer % 4) << 20, 0, nullptr));

    std::vector<void*> kept;  // what survives each step (like an optimizer's state growing)
    for (int step = 0; step < args.steps; ++step) {
      std::vector<void*> activations;
      const std::size_t sequence = 256 + random() % 768;  // variable sequence length
      for (int layer = 0; layer < 24; ++layer) {
        activations.push_back(fragless::allocate(sequence * 4096, 0, nullptr));
        void* scratch = fragless::allocate(512 + random() % 60000, 0, side_stream);
        fragless::record_stream(scratch, nullptr);
        fragless::deallocate(scratch);
      }
      for (std::size_t i = 0; i < activations.size(); ++i) {
        if (i % 7 == 3 && step % 5 == 0) kept.push_back(activations[i]);
        else fragless::deallocate(activations[i]);
      }
    }
    if (!args.quiet) std::printf("%s", fragless::memory_summary(0).c_str());
    if (args.hold_seconds > 0) {
      std::fflush(stdout);
      std::this_thread::sleep_for(std::chrono::duration<double>(args.hold_seconds));
    }
    for (void* block : kept) fragless::deallocate(block);
    for (void* block : weights) fragless::deallocate(block);
    cudaStreamDestroy(side_stream);
    return 0;
  } catch (const std::exception& failure) {
    std::fprintf(stderr, "fragless-demo: %s\n", failure.what());
    return 1;
  }
}
