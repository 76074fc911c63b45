// simcuda configured from the environment (see the ENV of this test in CMakeLists.txt):
// SIMCUDA_MEMORY=256MiB, SIMCUDA_FAIL="cudaMalloc:2:2,cuMemAddressReserve:1+:2",
// SIMCUDA_COST_NS="cudaGetDevice:1000000" and a malformed SIMCUDA_KERNEL_NS that must only warn.
#include <chrono>

#include "simcuda_test_support.h"

using simcuda_test::require_simcuda;

TEST_CASE("SIMCUDA_MEMORY sets the capacity") {
  require_simcuda();
  CHECK(simcuda_capacity(0) == (256u << 20));
  size_t free_bytes = 0, total_bytes = 0;
  REQUIRE(cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess);
  CHECK(total_bytes == (256u << 20));
  cudaDeviceProp properties{};
  REQUIRE(cudaGetDeviceProperties(&properties, 0) == cudaSuccess);
  CHECK(properties.totalGlobalMem == (256u << 20));
}

TEST_CASE("SIMCUDA_FAIL fails the second cudaMalloc and every cuMemAddressReserve") {
  require_simcuda();
  void* first = nullptr;
  void* second = nullptr;
  void* third = nullptr;
  CHECK(cudaMalloc(&first, 4096) == cudaSuccess);
  CHECK(cudaMalloc(&second, 4096) == cudaErrorMemoryAllocation);
  CHECK(cudaMalloc(&third, 4096) == cudaSuccess);
  cudaFree(first);
  cudaFree(third);
  CUdeviceptr base = 0;
  for (int i = 0; i < 3; ++i) CHECK(cuMemAddressReserve(&base, size_t{2} << 20, 0, 0, 0) == CUDA_ERROR_OUT_OF_MEMORY);
  cudaGetLastError();
}

TEST_CASE("SIMCUDA_COST_NS weighs calls") {
  require_simcuda();
  int device = -1;
  auto started = std::chrono::steady_clock::now();
  REQUIRE(cudaGetDevice(&device) == cudaSuccess);
  CHECK(std::chrono::steady_clock::now() - started >= std::chrono::microseconds(1000));
}
