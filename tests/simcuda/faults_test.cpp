// Fault injection, call counters, the cost model and emulation time through the control
// API, and not-supported functions answering an error code instead of aborting.
#include <chrono>
#include <thread>

#include "simcuda_test_support.h"

using simcuda_test::require_simcuda;

TEST_CASE("a fault fails exactly the nth call, then calls succeed again") {
  require_simcuda();
  simcuda_clear_faults();
  REQUIRE(simcuda_fail("cudaMalloc", 2, cudaErrorMemoryAllocation, SIMCUDA_FAIL_ONCE) == 0);
  void* first = nullptr;
  void* second = nullptr;
  void* third = nullptr;
  CHECK(cudaMalloc(&first, 4096) == cudaSuccess);
  CHECK(cudaMalloc(&second, 4096) == cudaErrorMemoryAllocation);
  CHECK(second == nullptr);
  CHECK(cudaGetLastError() == cudaErrorMemoryAllocation);
  CHECK(cudaMalloc(&third, 4096) == cudaSuccess);
  REQUIRE(cudaFree(first) == cudaSuccess);
  REQUIRE(cudaFree(third) == cudaSuccess);
}

TEST_CASE("a from-nth fault fails every later call until cleared") {
  require_simcuda();
  simcuda_clear_faults();
  REQUIRE(simcuda_fail("cuMemCreate", 1, CUDA_ERROR_OUT_OF_MEMORY, SIMCUDA_FAIL_FROM_NTH) == 0);
  CUmemAllocationProp properties{};
  properties.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  properties.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  properties.location.id = 0;
  CUmemGenericAllocationHandle handle = 0;
  for (int i = 0; i < 3; ++i) CHECK(cuMemCreate(&handle, size_t{2} << 20, &properties, 0) == CUDA_ERROR_OUT_OF_MEMORY);
  simcuda_clear_faults();
  REQUIRE(cuMemCreate(&handle, size_t{2} << 20, &properties, 0) == CUDA_SUCCESS);
  REQUIRE(cuMemRelease(handle) == CUDA_SUCCESS);
  // Faults apply to functions reached through entry points too.
  REQUIRE(simcuda_fail("cuMemMap", 1, CUDA_ERROR_INVALID_VALUE, SIMCUDA_FAIL_ONCE) == 0);
  void* map_function = nullptr;
  cudaDriverEntryPointQueryResult status{};
  REQUIRE(cudaGetDriverEntryPointByVersion("cuMemMap", &map_function, 12000, cudaEnableDefault, &status) == cudaSuccess);
  CHECK(reinterpret_cast<decltype(&cuMemMap)>(map_function)(0, 0, 0, 0, 0) == CUDA_ERROR_INVALID_VALUE);
  simcuda_clear_faults();
}

TEST_CASE("unknown names are refused") {
  CHECK(simcuda_fail("cudaNoSuchThing", 1, 2, SIMCUDA_FAIL_ONCE) == -1);
  CHECK(simcuda_fail(nullptr, 1, 2, SIMCUDA_FAIL_ONCE) == -1);
  CHECK(simcuda_fail("cudaMalloc", 0, 2, SIMCUDA_FAIL_ONCE) == -1);  // calls are numbered from 1
  CHECK(simcuda_set_cost_ns("cudaNoSuchThing", 5) == -1);
  CHECK(simcuda_call_count("cudaNoSuchThing") == 0);
}

TEST_CASE("counters count each entry point once, not the calls it makes inside") {
  require_simcuda();
  simcuda_reset_counters();
  CHECK(simcuda_call_count("cudaMalloc") == 0);
  void* pointers[3] = {};
  for (void*& pointer : pointers) REQUIRE(cudaMalloc(&pointer, 1000) == cudaSuccess);
  for (void* pointer : pointers) REQUIRE(cudaFree(pointer) == cudaSuccess);
  CHECK(simcuda_call_count("cudaMalloc") == 3);
  CHECK(simcuda_call_count("cudaFree") == 3);
  CHECK(simcuda_call_count("cuMemAlloc_v2") == 0);  // used inside cudaMalloc, not by the program
  CUdeviceptr direct = 0;
  REQUIRE(cuMemAlloc_v2(&direct, 4096) == CUDA_SUCCESS);
  REQUIRE(cuMemFree_v2(direct) == CUDA_SUCCESS);
  CHECK(simcuda_call_count("cuMemAlloc_v2") == 1);
  simcuda_reset_counters();
  CHECK(simcuda_call_count("cudaMalloc") == 0);
}

TEST_CASE("the cost model spends the configured time in every call") {
  require_simcuda();
  REQUIRE(simcuda_set_cost_ns("cudaGetDeviceCount", 2'000'000) == 0);
  int count = 0;
  auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i) REQUIRE(cudaGetDeviceCount(&count) == cudaSuccess);
  auto spent = std::chrono::steady_clock::now() - started;
  CHECK(spent >= std::chrono::milliseconds(6));
  REQUIRE(simcuda_set_cost_ns("cudaGetDeviceCount", 0) == 0);
}

TEST_CASE("emulation time counts the timed functions' calls on this thread, less their modelled cost") {
  require_simcuda();
  REQUIRE(simcuda_time_calls("cudaMalloc", 1) == 0);
  REQUIRE(simcuda_time_calls("cudaFree", 1) == 0);
  CHECK(simcuda_time_calls("cudaNoSuchThing", 1) == -1);
  // A timed call adds the time it spent, and no more than its whole duration.
  void* pointer = nullptr;
  std::uint64_t before = simcuda_thread_emulation_ns();
  auto started = std::chrono::steady_clock::now();
  REQUIRE(cudaMalloc(&pointer, 1 << 20) == cudaSuccess);
  auto whole_ns = static_cast<std::uint64_t>((std::chrono::steady_clock::now() - started).count());
  std::uint64_t spent = simcuda_thread_emulation_ns() - before;
  CHECK(spent > 0);
  CHECK(spent <= whole_ns);
  // The modelled cost stays the caller's: 5 ms spent in cudaFree, not counted as emulation.
  REQUIRE(simcuda_set_cost_ns("cudaFree", 5'000'000) == 0);
  before = simcuda_thread_emulation_ns();
  REQUIRE(cudaFree(pointer) == cudaSuccess);
  CHECK(simcuda_thread_emulation_ns() - before < 5'000'000);
  REQUIRE(simcuda_set_cost_ns("cudaFree", 0) == 0);
  // An untimed function adds nothing, however long it takes.
  REQUIRE(simcuda_set_cost_ns("cudaGetDeviceCount", 1'000'000) == 0);
  int count = 0;
  before = simcuda_thread_emulation_ns();
  REQUIRE(cudaGetDeviceCount(&count) == cudaSuccess);
  CHECK(simcuda_thread_emulation_ns() == before);
  REQUIRE(simcuda_set_cost_ns("cudaGetDeviceCount", 0) == 0);
  // Another thread's timed calls are its own.
  before = simcuda_thread_emulation_ns();
  std::uint64_t other_thread_spent = 0;
  std::thread other([&] {
    const std::uint64_t start = simcuda_thread_emulation_ns();
    void* block = nullptr;
    if (cudaMalloc(&block, 1 << 20) == cudaSuccess) cudaFree(block);
    other_thread_spent = simcuda_thread_emulation_ns() - start;
  });
  other.join();
  CHECK(other_thread_spent > 0);
  CHECK(simcuda_thread_emulation_ns() == before);
  // Untimed again, a call adds nothing.
  REQUIRE(simcuda_time_calls("cudaMalloc", 0) == 0);
  REQUIRE(simcuda_time_calls("cudaFree", 0) == 0);
  before = simcuda_thread_emulation_ns();
  REQUIRE(cudaMalloc(&pointer, 1 << 20) == cudaSuccess);
  REQUIRE(cudaFree(pointer) == cudaSuccess);
  CHECK(simcuda_thread_emulation_ns() == before);
}

TEST_CASE("functions simcuda does not implement answer not-supported and are counted") {
  require_simcuda();
  simcuda_reset_counters();
  void* managed = nullptr;
  CHECK(cudaMallocManaged(&managed, 4096, cudaMemAttachGlobal) == cudaErrorNotSupported);
  CHECK(cudaGetLastError() == cudaErrorNotSupported);
  CHECK(simcuda_call_count("cudaMallocManaged") == 1);
  CUmodule module = nullptr;
  CHECK(cuModuleLoad(&module, "nothing.cubin") == CUDA_ERROR_NOT_SUPPORTED);
  // Faults apply to unsupported functions too.
  REQUIRE(simcuda_fail("cudaMallocManaged", 1, cudaErrorInvalidValue, SIMCUDA_FAIL_ONCE) == 0);
  CHECK(cudaMallocManaged(&managed, 4096, cudaMemAttachGlobal) == cudaErrorInvalidValue);
  cudaGetLastError();
}
