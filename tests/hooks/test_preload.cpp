// Runs under LD_PRELOAD=libfragless_preload.so against simcuda (see CMakeLists.txt): a plain
// CUDA program's allocations are served by fragless, foreign pointers are forwarded, the
// driver API and entry-point lookups are caught, plain cudaFree keeps its ordering promise
// (race oracle), and fork with allocating threads does not hang.
#include <catch2/catch.hpp>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "preload_support.hpp"
#include "simcuda/control.h"

using preload_test::figures;

namespace {

void require_simcuda_and_preload() {
  cudaDeviceProp properties{};
  REQUIRE(cudaGetDeviceProperties(&properties, 0) == cudaSuccess);
  REQUIRE(std::string(properties.name).find("simcuda") != std::string::npos);
  REQUIRE(dlsym(RTLD_DEFAULT, "fragless_get_memory_figures") != nullptr);
}

// A new non-blocking stream (the test stops if it cannot be made).
cudaStream_t non_blocking_stream() {
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  return stream;
}

std::string race_report() {
  std::string text(1 << 16, '\0');
  const size_t needed = simcuda_race_report(text.data(), text.size());
  text.resize(std::min(needed, text.size() - 1));
  return text;
}

}  // namespace

TEST_CASE("cudaMalloc and cudaFree are served by fragless", "[preload]") {
  require_simcuda_and_preload();
  REQUIRE(cudaFree(nullptr) == cudaSuccess);  // runtime initialisation idiom
  const auto before = figures();
  const uint64_t device_mallocs_before = simcuda_call_count("cudaMalloc");

  std::vector<void*> blocks;
  for (size_t size : {size_t{1}, size_t{512}, size_t{4000}, size_t{1} << 20, size_t{3} << 20, size_t{40} << 20}) {
    void* block = nullptr;
    REQUIRE(cudaMalloc(&block, size) == cudaSuccess);
    REQUIRE(block != nullptr);
    REQUIRE(reinterpret_cast<uintptr_t>(block) % 256 == 0);
    std::memset(block, 0xab, size);  // simcuda device memory is host memory
    blocks.push_back(block);
  }
  const auto during = figures();
  CHECK(during.allocated_bytes - before.allocated_bytes >= (int64_t{44} << 20) + 4000 + 512 + 1);
  for (void* block : blocks) REQUIRE(cudaFree(block) == cudaSuccess);
  const auto after = figures();
  CHECK(after.allocated_bytes == before.allocated_bytes);
  // The real runtime's cudaMalloc was not used for any of these (fragless uses VMM pages).
  CHECK(simcuda_call_count("cudaMalloc") == device_mallocs_before);
}

TEST_CASE("pointers fragless did not allocate are forwarded to the real runtime", "[preload]") {
  require_simcuda_and_preload();
  // cudaMallocFromPoolAsync is not interposed: the block comes from the real runtime.
  cudaMemPool_t pool = nullptr;
  REQUIRE(cudaDeviceGetDefaultMemPool(&pool, 0) == cudaSuccess);
  void* foreign = nullptr;
  REQUIRE(cudaMallocFromPoolAsync(&foreign, 1 << 16, pool, nullptr) == cudaSuccess);
  const auto before = figures();
  CHECK(cudaFree(foreign) == cudaSuccess);  // forwarded, and the real runtime knows it
  CHECK(figures().allocated_bytes == before.allocated_bytes);
  // A pointer nobody allocated: the real runtime's error comes back.
  int on_stack = 0;
  CHECK(cudaFree(&on_stack) != cudaSuccess);
  cudaGetLastError();
}

TEST_CASE("driver allocations, directly and through entry-point lookups, are caught", "[preload]") {
  require_simcuda_and_preload();
  const auto before = figures();

  CUdeviceptr direct = 0;
  REQUIRE(cuMemAlloc(&direct, 1 << 20) == CUDA_SUCCESS);
  CHECK(figures().allocated_bytes >= before.allocated_bytes + (1 << 20));
  REQUIRE(cuMemFree(direct) == CUDA_SUCCESS);

  void* alloc_function = nullptr;
  void* free_function = nullptr;
  CUdriverProcAddressQueryResult status{};
  REQUIRE(cuGetProcAddress("cuMemAlloc", &alloc_function, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &status) == CUDA_SUCCESS);
  REQUIRE(cuGetProcAddress("cuMemFree", &free_function, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &status) == CUDA_SUCCESS);
  auto alloc = reinterpret_cast<CUresult (*)(CUdeviceptr*, size_t)>(alloc_function);
  auto release = reinterpret_cast<CUresult (*)(CUdeviceptr)>(free_function);
  CUdeviceptr looked_up = 0;
  REQUIRE(alloc(&looked_up, 2 << 20) == CUDA_SUCCESS);
  CHECK(figures().allocated_bytes >= before.allocated_bytes + (2 << 20));
  REQUIRE(release(looked_up) == CUDA_SUCCESS);

  cudaDriverEntryPointQueryResult runtime_status{};
  void* runtime_alloc = nullptr;
  REQUIRE(cudaGetDriverEntryPointByVersion("cuMemAlloc", &runtime_alloc, 12000, cudaEnableDefault, &runtime_status) ==
          cudaSuccess);
  CUdeviceptr through_runtime = 0;
  REQUIRE(reinterpret_cast<CUresult (*)(CUdeviceptr*, size_t)>(runtime_alloc)(&through_runtime, 1 << 16) ==
          CUDA_SUCCESS);
  CHECK(figures().allocated_bytes >= before.allocated_bytes + (1 << 16));
  REQUIRE(cuMemFree(through_runtime) == CUDA_SUCCESS);
  CHECK(figures().allocated_bytes == before.allocated_bytes);
}

TEST_CASE("plain cudaFree: no reuse while earlier work on any stream can touch the block", "[preload][race]") {
  require_simcuda_and_preload();
  simcuda_race_reset();
  cudaStream_t blocking = nullptr;
  REQUIRE(cudaStreamCreate(&blocking) == cudaSuccess);
  cudaStream_t non_blocking = non_blocking_stream();

  // Each round: a block written by pending work on some stream is freed with plain cudaFree,
  // then the program allocates until it gets that memory back (or gives up) and uses every
  // new block at once on the legacy stream and on a non-blocking stream -- what a program may
  // do with cudaMalloc'd memory. Any reuse before the earlier work is done is a race.
  int reused = 0;
  for (int round = 0; round < 60; ++round) {
    const size_t sizes[4] = {8192, 40 << 10, 3 << 19, 3 << 20};
    const size_t size = sizes[round % 4];
    void* first = nullptr;
    REQUIRE(cudaMalloc(&first, size) == cudaSuccess);
    const cudaStream_t users[3] = {blocking, non_blocking, nullptr};
    simcuda_launch(users[round % 3], first, size, /*writes=*/1);  // still pending
    REQUIRE(cudaFree(first) == cudaSuccess);
    if (round % 5 == 4) simcuda_complete_all();  // sometimes the work is done by now

    std::vector<void*> held;
    bool got_it_back = false;
    for (int attempt = 0; attempt < 400 && !got_it_back; ++attempt) {
      void* next = nullptr;
      REQUIRE(cudaMalloc(&next, size) == cudaSuccess);
      // First use of the new block: on the legacy stream or on a non-blocking stream.
      simcuda_launch((round + attempt) % 2 ? non_blocking : nullptr, next, size, 1);
      held.push_back(next);
      got_it_back = next == first;
    }
    reused += got_it_back;
    simcuda_complete_all();  // the program's later uses of its blocks are not under test
    for (void* block : held) REQUIRE(cudaFree(block) == cudaSuccess);
    simcuda_complete_all();
  }
  INFO(race_report());
  CHECK(simcuda_race_count() == 0);
  CHECK(reused > 10);  // the test only means something if freed memory really comes back
  REQUIRE(cudaStreamDestroy(blocking) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(non_blocking) == cudaSuccess);
}

TEST_CASE("plain cudaMalloc reusing memory freed on another stream is usable on any stream", "[preload][race]") {
  require_simcuda_and_preload();
  simcuda_race_reset();
  cudaStream_t producer = non_blocking_stream();
  cudaStream_t consumer = non_blocking_stream();
  int reused = 0;
  for (int round = 0; round < 40; ++round) {
    const size_t size = (round % 2 ? 3 << 20 : 5 << 19);
    void* freed_async = nullptr;
    REQUIRE(cudaMallocAsync(&freed_async, size, producer) == cudaSuccess);
    simcuda_launch(producer, freed_async, size, 1);  // pending on the producer stream
    REQUIRE(cudaFreeAsync(freed_async, producer) == cudaSuccess);
    std::vector<void*> held;
    bool got_it_back = false;
    for (int attempt = 0; attempt < 64 && !got_it_back; ++attempt) {
      void* next = nullptr;
      REQUIRE(cudaMalloc(&next, size) == cudaSuccess);
      simcuda_launch(consumer, next, size, 1);  // cudaMalloc'd memory may be used on any stream
      held.push_back(next);
      got_it_back = next == freed_async;
    }
    reused += got_it_back;
    simcuda_complete_all();
    for (void* block : held) REQUIRE(cudaFree(block) == cudaSuccess);
    simcuda_complete_all();
  }
  INFO(race_report());
  CHECK(simcuda_race_count() == 0);
  CHECK(reused > 10);
  REQUIRE(cudaStreamDestroy(producer) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(consumer) == cudaSuccess);
}

TEST_CASE("plain cudaFree keeps a block pending while earlier work of any stream may touch it", "[preload][race]") {
  require_simcuda_and_preload();
  cudaStream_t non_blocking = non_blocking_stream();
  const size_t size = 3 << 20;
  for (cudaStream_t user : {non_blocking, static_cast<cudaStream_t>(nullptr)}) {
    void* block = nullptr;
    REQUIRE(cudaMalloc(&block, size) == cudaSuccess);
    simcuda_launch(user, block, size, 1);  // pending work on the block
    const auto before = figures();
    REQUIRE(cudaFree(block) == cudaSuccess);
    const auto after = figures();
    CHECK(after.allocated_bytes < before.allocated_bytes);   // the program no longer owns it
    CHECK(after.active_bytes == before.active_bytes);        // but fragless holds it: pending free
    simcuda_complete_all();
  }
  REQUIRE(cudaStreamDestroy(non_blocking) == cudaSuccess);
}

TEST_CASE("the race oracle sees a program's own stream bug through the interposer", "[preload][race]") {
  require_simcuda_and_preload();
  simcuda_race_reset();
  cudaStream_t a = non_blocking_stream();
  cudaStream_t b = non_blocking_stream();
  void* block = nullptr;
  REQUIRE(cudaMallocAsync(&block, 1 << 16, a) == cudaSuccess);
  simcuda_launch(a, block, 1 << 16, 1);
  simcuda_launch(b, block, 1 << 16, 1);  // no event between a and b: a real race
  CHECK(simcuda_race_count() >= 1);
  simcuda_complete_all();
  REQUIRE(cudaFreeAsync(block, a) == cudaSuccess);
  simcuda_race_reset();
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
}

// Note [Errors through the runtime]: the code the real runtime would return, and the same
// last error, never a silent success.
TEST_CASE("errors are returned and recorded as the runtime's last error", "[preload][errors]") {
  require_simcuda_and_preload();
  cudaGetLastError();
  cudaStream_t doomed = non_blocking_stream();
  void* block = nullptr;
  REQUIRE(cudaMallocAsync(&block, 1 << 20, doomed) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(doomed) == cudaSuccess);
  const auto before = figures();
  // A free on a destroyed stream: an invalid handle, and the block is not lost.
  CHECK(cudaFreeAsync(block, doomed) == cudaErrorInvalidResourceHandle);
  CHECK(cudaGetLastError() == cudaErrorInvalidResourceHandle);
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(figures().allocated_bytes == before.allocated_bytes);
  CHECK(cuMemFreeAsync(reinterpret_cast<CUdeviceptr>(block), reinterpret_cast<CUstream>(doomed)) ==
        CUDA_ERROR_INVALID_HANDLE);
  CHECK(cudaGetLastError() == cudaSuccess);  // the driver API leaves the runtime's last error alone
  CHECK(cudaFree(block) == cudaSuccess);  // still the caller's: freed once, normally
  CHECK(figures().allocated_bytes < before.allocated_bytes);
  // Allocating on a destroyed stream fails the same way.
  void* other = reinterpret_cast<void*>(1);
  CHECK(cudaMallocAsync(&other, 4096, doomed) == cudaErrorInvalidResourceHandle);
  CHECK(other == nullptr);
  CHECK(cudaGetLastError() == cudaErrorInvalidResourceHandle);
  // Out of memory: cudaErrorMemoryAllocation, also as the last error.
  void* huge = nullptr;
  const size_t too_big = static_cast<size_t>(simcuda_capacity(0)) + (size_t{1} << 30);
  CHECK(cudaMalloc(&huge, too_big) == cudaErrorMemoryAllocation);
  CHECK(cudaGetLastError() == cudaErrorMemoryAllocation);
  CHECK(cudaMallocAsync(&huge, too_big, nullptr) == cudaErrorMemoryAllocation);
  CHECK(cudaGetLastError() == cudaErrorMemoryAllocation);
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(cudaMalloc(nullptr, 16) == cudaErrorInvalidValue);
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);
}

// Note [Stream destruction]: the interposer retires the stream (Note [Retired streams]).
TEST_CASE("a new stream with a destroyed stream's handle does not inherit its memory", "[preload][race]") {
  require_simcuda_and_preload();
  simcuda_race_reset();
  for (const size_t size : {size_t{4096}, size_t{3} << 20}) {
    cudaStream_t dying = non_blocking_stream();
    void* block = nullptr;
    REQUIRE(cudaMallocAsync(&block, size, dying) == cudaSuccess);
    simcuda_launch(dying, block, size, 1);
    REQUIRE(cudaFreeAsync(block, dying) == cudaSuccess);
    REQUIRE(cudaStreamDestroy(dying) == cudaSuccess);  // its kernel still runs
    std::vector<cudaStream_t> streams;
    cudaStream_t same = nullptr;
    for (int i = 0; i < 16 && same == nullptr; ++i) {
      cudaStream_t created = non_blocking_stream();
      streams.push_back(created);
      if (created == dying) same = created;
    }
    REQUIRE(same != nullptr);
    void* again = nullptr;
    REQUIRE(cudaMallocAsync(&again, size, same) == cudaSuccess);
    simcuda_launch(same, again, size, 1);
    INFO(race_report());
    CHECK(simcuda_race_count() == 0);
    simcuda_complete_all();
    REQUIRE(cudaFreeAsync(again, same) == cudaSuccess);
    for (cudaStream_t stream : streams) REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
    simcuda_race_reset();
  }
}

TEST_CASE("cudaMemGetInfo counts fragless's cached memory as free", "[preload]") {
  require_simcuda_and_preload();
  void* block = nullptr;
  REQUIRE(cudaMalloc(&block, 64 << 20) == cudaSuccess);
  REQUIRE(cudaFree(block) == cudaSuccess);
  simcuda_complete_all();
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  REQUIRE(cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess);
  const auto now = figures();
  const uint64_t device_used = simcuda_used_bytes(0);
  CHECK(total_bytes == simcuda_capacity(0));
  // free = what the device has left + what fragless caches (reserved - allocated).
  CHECK(free_bytes == total_bytes - device_used + static_cast<size_t>(now.reserved_bytes - now.allocated_bytes));
}

// Not in the sanitizer builds: GCC 12's ThreadSanitizer and AddressSanitizer runtimes do
// not make their allocators fork-safe, so a child forked while a parent thread held one of
// their locks hangs at its first host allocation -- which any CUDA call of the child makes
// (seen under TSan once in a few thousand forks, on the stack depot's lock; under ASan in
// the stats publisher's fork test, on a size class's region lock). TSan did find two real
// hangs here first (a child waiting on the guard of a function-local static a parent
// thread was making: Note [Fork] in interposer.cpp, Note [No guarded statics on entry] in
// simcuda). The test runs in the default build, whose glibc malloc is fork-safe.
#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
TEST_CASE("fork with allocating threads does not hang", "[preload][fork]") {
  require_simcuda_and_preload();
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < 2; ++t) {
    workers.emplace_back([&stop, t] {
      std::vector<void*> held;
      while (!stop.load()) {
        void* block = nullptr;
        if (cudaMalloc(&block, 4096 * (t + 1)) == cudaSuccess) held.push_back(block);
        if (held.size() > 64) {
          for (void* b : held) cudaFree(b);
          held.clear();
        }
      }
      for (void* b : held) cudaFree(b);
    });
  }
  for (int i = 0; i < 20; ++i) {
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      // In the child: interposed calls must return (forwarded), never deadlock.
      void* block = nullptr;
      (void)cudaMalloc(&block, 4096);
      (void)cudaFree(block);
      size_t free_bytes = 0, total_bytes = 0;
      (void)cudaMemGetInfo(&free_bytes, &total_bytes);
      _exit(0);
    }
    int status = 0;
    // Bounded wait: a deadlocked child fails the test instead of hanging it.
    bool exited = false;
    for (int waited_ms = 0; waited_ms < 10000; waited_ms += 10) {
      if (waitpid(child, &status, WNOHANG) == child) {
        exited = true;
        break;
      }
      usleep(10000);
    }
    if (!exited) kill(child, SIGKILL), waitpid(child, &status, 0);
    REQUIRE(exited);
    CHECK(WIFEXITED(status));
  }
  stop = true;
  for (auto& worker : workers) worker.join();
}
#endif  // no sanitizer
