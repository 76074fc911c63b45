// A plain CUDA program (host code against the real headers, shared runtime) that the
// preload tests run under LD_PRELOAD. It allocates, writes, frees, and checks through
// simcuda's counters whether the real cudaMalloc was used: under the interposer it must
// not be; with --expect-passthrough it must be.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>

#include "simcuda/control.h"

int main(int argc, char** argv) {
  const bool expect_passthrough = argc > 1 && std::strcmp(argv[1], "--expect-passthrough") == 0;
  if (cudaFree(nullptr) != cudaSuccess) {
    std::printf("preload program: runtime did not initialise\n");
    return 1;
  }
  const unsigned long long real_before = simcuda_call_count("cudaMalloc");
  void* blocks[8] = {};
  for (int i = 0; i < 8; ++i) {
    if (cudaMalloc(&blocks[i], static_cast<size_t>(i + 1) << 16) != cudaSuccess) {
      std::printf("preload program: cudaMalloc failed\n");
      return 1;
    }
    std::memset(blocks[i], i, static_cast<size_t>(i + 1) << 16);
  }
  for (void* block : blocks) cudaFree(block);
  const unsigned long long real_calls = simcuda_call_count("cudaMalloc") - real_before;
  if (expect_passthrough != (real_calls == 8)) {
    std::printf("preload program: real cudaMalloc called %llu times (passthrough expected: %d)\n", real_calls,
                expect_passthrough);
    return 1;
  }
  std::printf("preload program: ok\n");
  return 0;
}
