// cudaMalloc'd memory on simcuda: alignment, capacity and OOM, copies and memsets, pointer
// queries, stream-ordered pools, IPC, and bad input answered with error codes.
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "simcuda_test_support.h"

using simcuda_test::require_simcuda;

TEST_CASE("runs on simcuda") { require_simcuda(); }

TEST_CASE("cudaMalloc gives 256-byte aligned, disjoint, accessible device memory") {
  require_simcuda();
  std::vector<void*> pointers;
  for (size_t bytes : {1, 255, 256, 1000, 4096, 65537, 3 << 20}) {
    void* pointer = nullptr;
    REQUIRE(cudaMalloc(&pointer, bytes) == cudaSuccess);
    REQUIRE(pointer != nullptr);
    CHECK(reinterpret_cast<uintptr_t>(pointer) % 256 == 0);
    CHECK(simcuda_is_accessible(pointer, bytes) == 1);
    for (void* other : pointers) CHECK(other != pointer);
    pointers.push_back(pointer);
  }
  // Device memory never comes from the host heap.
  void* host = std::malloc(64);
  CHECK(simcuda_is_accessible(host, 64) == 0);
  std::free(host);
  for (void* pointer : pointers) {
    REQUIRE(cudaFree(pointer) == cudaSuccess);
    CHECK(simcuda_is_accessible(pointer, 1) == 0);
  }
}

TEST_CASE("capacity: cudaMemGetInfo tracks allocations and allocations past it fail") {
  require_simcuda();
  const uint64_t original = simcuda_capacity(0);
  REQUIRE(simcuda_set_capacity(0, 64ull << 20) == 0);
  size_t free_bytes = 0, total_bytes = 0;
  REQUIRE(cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess);
  CHECK(total_bytes == (64u << 20));
  const uint64_t used_before = simcuda_used_bytes(0);
  CHECK(free_bytes == total_bytes - used_before);

  void* first = nullptr;
  REQUIRE(cudaMalloc(&first, 40u << 20) == cudaSuccess);
  CHECK(simcuda_used_bytes(0) == used_before + (40u << 20));
  REQUIRE(cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess);
  CHECK(free_bytes == total_bytes - used_before - (40u << 20));

  void* second = nullptr;
  CHECK(cudaMalloc(&second, 30u << 20) == cudaErrorMemoryAllocation);
  CHECK(second == nullptr);
  CHECK(cudaGetLastError() == cudaErrorMemoryAllocation);
  CHECK(cudaGetLastError() == cudaSuccess);  // reading resets it

  REQUIRE(cudaFree(first) == cudaSuccess);
  CHECK(simcuda_used_bytes(0) == used_before);
  REQUIRE(cudaMalloc(&second, 30u << 20) == cudaSuccess);
  REQUIRE(cudaFree(second) == cudaSuccess);
  REQUIRE(simcuda_set_capacity(0, original) == 0);
}

TEST_CASE("cudaMemcpy and cudaMemset really move bytes") {
  require_simcuda();
  constexpr size_t kBytes = 10000;
  void* device_a = nullptr;
  void* device_b = nullptr;
  REQUIRE(cudaMalloc(&device_a, kBytes) == cudaSuccess);
  REQUIRE(cudaMalloc(&device_b, kBytes) == cudaSuccess);
  std::vector<unsigned char> host(kBytes), back(kBytes, 0);
  for (size_t i = 0; i < kBytes; ++i) host[i] = static_cast<unsigned char>(i * 7 + 3);
  REQUIRE(cudaMemcpy(device_a, host.data(), kBytes, cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaMemcpy(device_b, device_a, kBytes, cudaMemcpyDeviceToDevice) == cudaSuccess);
  REQUIRE(cudaMemcpy(back.data(), device_b, kBytes, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(back == host);

  REQUIRE(cudaMemset(device_b, 0xAB, 100) == cudaSuccess);
  REQUIRE(cudaMemcpy(back.data(), device_b, kBytes, cudaMemcpyDefault) == cudaSuccess);
  for (size_t i = 0; i < 100; ++i) REQUIRE(back[i] == 0xAB);
  CHECK(back[100] == host[100]);

  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(device_a, 0x11, kBytes, stream) == cudaSuccess);
  REQUIRE(cudaMemcpyAsync(back.data(), device_a, kBytes, cudaMemcpyDeviceToHost, stream) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  for (size_t i = 0; i < kBytes; ++i) REQUIRE(back[i] == 0x11);
  // 32-bit driver memset.
  REQUIRE(cuMemsetD32_v2(reinterpret_cast<CUdeviceptr>(device_a), 0xDEADBEEFu, 4) == CUDA_SUCCESS);
  uint32_t words[4] = {};
  REQUIRE(cudaMemcpy(words, device_a, sizeof words, cudaMemcpyDeviceToHost) == cudaSuccess);
  for (uint32_t word : words) CHECK(word == 0xDEADBEEFu);
  REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
  REQUIRE(cudaFree(device_a) == cudaSuccess);
  REQUIRE(cudaFree(device_b) == cudaSuccess);
}

TEST_CASE("bad input gets error codes, never a crash") {
  require_simcuda();
  int on_stack = 0;
  CHECK(cudaFree(&on_stack) == cudaErrorInvalidValue);  // unknown pointer
  void* pointer = nullptr;
  REQUIRE(cudaMalloc(&pointer, 4096) == cudaSuccess);
  CHECK(cudaFree(static_cast<char*>(pointer) + 256) == cudaErrorInvalidValue);  // interior pointer
  REQUIRE(cudaFree(pointer) == cudaSuccess);
  CHECK(cudaFree(pointer) == cudaErrorInvalidValue);  // double free
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);

  void* zero = reinterpret_cast<void*>(1);
  CHECK(cudaMalloc(&zero, 0) == cudaSuccess);
  CHECK(zero == nullptr);
  CUdeviceptr driver_zero = 0;
  CHECK(cuMemAlloc_v2(&driver_zero, 0) == CUDA_ERROR_INVALID_VALUE);

  void* absurd = nullptr;
  CHECK(cudaMalloc(&absurd, SIZE_MAX) == cudaErrorMemoryAllocation);
  CHECK(cudaMalloc(&absurd, size_t{1} << 60) == cudaErrorMemoryAllocation);
  CHECK(cudaMalloc(nullptr, 16) == cudaErrorInvalidValue);
  CHECK(cudaFree(nullptr) == cudaSuccess);

  // Copies touching freed memory fail and are reported.
  simcuda_race_reset();
  char host[16] = {};
  CHECK(cudaMemcpy(host, pointer, sizeof host, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);
  CHECK(simcuda_race_count() == 1);
  simcuda_race_reset();
  CHECK(cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(0x1234)) == cudaErrorInvalidResourceHandle);
  cudaGetLastError();
}

TEST_CASE("cudaPointerGetAttributes tells device memory from host memory") {
  require_simcuda();
  void* pointer = nullptr;
  REQUIRE(cudaMalloc(&pointer, 1024) == cudaSuccess);
  cudaPointerAttributes attributes{};
  REQUIRE(cudaPointerGetAttributes(&attributes, static_cast<char*>(pointer) + 100) == cudaSuccess);
  CHECK(attributes.type == cudaMemoryTypeDevice);
  CHECK(attributes.device == 0);
  int host = 0;
  REQUIRE(cudaPointerGetAttributes(&attributes, &host) == cudaSuccess);
  CHECK(attributes.type == cudaMemoryTypeUnregistered);
  CUdeviceptr base = 0;
  size_t size = 0;
  REQUIRE(cuMemGetAddressRange_v2(&base, &size, reinterpret_cast<CUdeviceptr>(pointer) + 10) == CUDA_SUCCESS);
  CHECK(base == reinterpret_cast<CUdeviceptr>(pointer));
  CHECK(size == 1024);
  REQUIRE(cudaFree(pointer) == cudaSuccess);
}

TEST_CASE("stream-ordered allocation frees when the stream's earlier work completes") {
  require_simcuda();
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  void* pointer = nullptr;
  REQUIRE(cudaMallocAsync(&pointer, 1 << 20, stream) == cudaSuccess);
  REQUIRE(simcuda_launch(stream, pointer, 1 << 20, 1) != 0);
  REQUIRE(cudaFreeAsync(pointer, stream) == cudaSuccess);
  CHECK(simcuda_is_accessible(pointer, 1) == 1);  // the kernel before it is still pending
  CHECK(cudaFreeAsync(pointer, stream) == cudaErrorInvalidValue);  // second free of the same block
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  CHECK(simcuda_is_accessible(pointer, 1) == 0);

  cudaMemPool_t pool = nullptr;
  REQUIRE(cudaDeviceGetDefaultMemPool(&pool, 0) == cudaSuccess);
  REQUIRE(cudaMallocFromPoolAsync(&pointer, 4096, pool, stream) == cudaSuccess);
  cuuint64_t used = 0;
  REQUIRE(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used) == cudaSuccess);
  CHECK(used == 4096);
  REQUIRE(cudaFreeAsync(pointer, stream) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  REQUIRE(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used) == cudaSuccess);
  CHECK(used == 0);
  CHECK(cudaMemPoolTrimTo(pool, 0) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
  CHECK(simcuda_race_count() == 0);
}

TEST_CASE("IPC handles open the same memory within one process") {
  require_simcuda();
  void* pointer = nullptr;
  REQUIRE(cudaMalloc(&pointer, 4096) == cudaSuccess);
  cudaIpcMemHandle_t handle{};
  REQUIRE(cudaIpcGetMemHandle(&handle, pointer) == cudaSuccess);
  void* opened = nullptr;
  REQUIRE(cudaIpcOpenMemHandle(&opened, handle, cudaIpcMemLazyEnablePeerAccess) == cudaSuccess);
  CHECK(opened == pointer);
  REQUIRE(cudaIpcCloseMemHandle(opened) == cudaSuccess);
  CHECK(cudaIpcCloseMemHandle(opened) == cudaErrorInvalidValue);
  REQUIRE(cudaFree(pointer) == cudaSuccess);
  CHECK(cudaIpcOpenMemHandle(&opened, handle, 0) == cudaErrorInvalidValue);
  cudaGetLastError();
}

TEST_CASE("many threads allocate, copy, launch and free at once") {
  require_simcuda();
  simcuda_race_reset();
  const uint64_t used_before = simcuda_used_bytes(0);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &failures] {
      cudaStream_t stream = nullptr;
      if (cudaStreamCreate(&stream) != cudaSuccess) ++failures;
      std::vector<unsigned char> host(4096, static_cast<unsigned char>(t + 1)), back(4096, 0);
      for (int i = 0; i < 200; ++i) {
        void* pointer = nullptr;
        if (cudaMalloc(&pointer, 4096 + static_cast<size_t>(i) * 512) != cudaSuccess) {
          ++failures;
          continue;
        }
        if (cudaMemcpyAsync(pointer, host.data(), 4096, cudaMemcpyHostToDevice, stream) != cudaSuccess) ++failures;
        if (simcuda_launch(stream, pointer, 4096, 1) == 0) ++failures;
        if (cudaMemcpyAsync(back.data(), pointer, 4096, cudaMemcpyDeviceToHost, stream) != cudaSuccess) ++failures;
        if (cudaStreamSynchronize(stream) != cudaSuccess || back != host) ++failures;
        if (cudaFree(pointer) != cudaSuccess) ++failures;
      }
      cudaStreamDestroy(stream);
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(failures == 0);
  CHECK(simcuda_used_bytes(0) == used_before);
  CHECK(simcuda_race_count() == 0);
}
