// The counting interposer (bench/counting, Note [Counting device calls]) function by
// function: run with libfragless_bench_counting.so preloaded, on simcuda, every counted
// function is called through its export and through each entry-point getter, and the
// interposer's count of each must equal simcuda's own (and the number of calls made). The
// replays of bench_counting_differential make no synchronizing call; this test does.
#include <catch2/catch.hpp>

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <map>
#include <string>

#include "backend/driver_entry_points.hpp"
#include "simcuda/control.h"

namespace {

using count_function = std::uint64_t (*)(const char*);

const char* const counted_names[] = {
    "cudaMalloc", "cudaFree", "cudaMallocAsync", "cudaFreeAsync", "cudaDeviceSynchronize", "cudaStreamSynchronize",
    "cudaEventSynchronize", "cudaEventRecord", "cudaStreamWaitEvent", "cudaEventQuery", "cuMemCreate", "cuMemRelease", "cuMemAlloc_v2", "cuMemFree_v2", "cuMemAllocAsync",
    "cuMemFreeAsync", "cuMemMap", "cuMemUnmap", "cuMemSetAccess", "cuMemAddressReserve", "cuMemAddressFree",
    "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize"};

struct driver_functions {
  PFN_cuMemAddressReserve_v10020 reserve = nullptr;
  PFN_cuMemAddressFree_v10020 address_free = nullptr;
  PFN_cuMemCreate_v10020 create = nullptr;
  PFN_cuMemRelease_v10020 release = nullptr;
  PFN_cuMemMap_v10020 map = nullptr;
  PFN_cuMemUnmap_v10020 unmap = nullptr;
  PFN_cuMemSetAccess_v10020 set_access = nullptr;
  PFN_cuMemAlloc_v3020 alloc = nullptr;
  PFN_cuMemFree_v3020 free = nullptr;
  PFN_cuMemAllocAsync_v11020 alloc_async = nullptr;
  PFN_cuMemFreeAsync_v11020 free_async = nullptr;
  PFN_cuCtxSynchronize_v2000 ctx_synchronize = nullptr;
  PFN_cuStreamSynchronize_v2000 stream_synchronize = nullptr;
  PFN_cuEventSynchronize_v2000 event_synchronize = nullptr;
};

enum class way { exports, get_proc_address, entry_point_by_version, entry_point };

template <typename F>
void look_up(way how, const char* name, F& out) {
  void* pointer = nullptr;
  if (how == way::get_proc_address) {
    CUdriverProcAddressQueryResult status{};
    REQUIRE(cuGetProcAddress(name, &pointer, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &status) == CUDA_SUCCESS);
  } else if (how == way::entry_point_by_version) {
    cudaDriverEntryPointQueryResult status{};
    REQUIRE(cudaGetDriverEntryPointByVersion(name, &pointer, 12000, cudaEnableDefault, &status) == cudaSuccess);
  } else {
    cudaDriverEntryPointQueryResult status{};
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    REQUIRE(cudaGetDriverEntryPoint(name, &pointer, cudaEnableDefault, &status) == cudaSuccess);
#pragma GCC diagnostic pop
  }
  REQUIRE(pointer != nullptr);
  out = reinterpret_cast<F>(pointer);
}

driver_functions functions_by(way how) {
  driver_functions f;
  if (how == way::exports) {
    f = {&cuMemAddressReserve, &cuMemAddressFree, &cuMemCreate, &cuMemRelease, &cuMemMap, &cuMemUnmap, &cuMemSetAccess,
         &cuMemAlloc_v2, &cuMemFree_v2, &cuMemAllocAsync, &cuMemFreeAsync, &cuCtxSynchronize, &cuStreamSynchronize,
         &cuEventSynchronize};
    return f;
  }
  look_up(how, "cuMemAddressReserve", f.reserve);
  look_up(how, "cuMemAddressFree", f.address_free);
  look_up(how, "cuMemCreate", f.create);
  look_up(how, "cuMemRelease", f.release);
  look_up(how, "cuMemMap", f.map);
  look_up(how, "cuMemUnmap", f.unmap);
  look_up(how, "cuMemSetAccess", f.set_access);
  look_up(how, "cuMemAlloc", f.alloc);
  look_up(how, "cuMemFree", f.free);
  look_up(how, "cuMemAllocAsync", f.alloc_async);
  look_up(how, "cuMemFreeAsync", f.free_async);
  // cudaGetDriverEntryPoint takes the runtime's version, which may pick cuCtxSynchronize_v2.
  if (how != way::entry_point) look_up(how, "cuCtxSynchronize", f.ctx_synchronize);
  look_up(how, "cuStreamSynchronize", f.stream_synchronize);
  look_up(how, "cuEventSynchronize", f.event_synchronize);
  return f;
}

void exercise(const driver_functions& f) {
  constexpr std::size_t page = std::size_t{2} << 20;
  CUdeviceptr range = 0;
  REQUIRE(f.reserve(&range, page, 0, 0, 0) == CUDA_SUCCESS);
  const CUmemAllocationProp prop = fragless::backend::device_allocation_prop(0);
  CUmemGenericAllocationHandle handle{};
  REQUIRE(f.create(&handle, page, &prop, 0) == CUDA_SUCCESS);
  REQUIRE(f.map(range, page, 0, handle, 0) == CUDA_SUCCESS);
  const CUmemAccessDesc access = fragless::backend::device_read_write_access(0);
  REQUIRE(f.set_access(range, page, &access, 1) == CUDA_SUCCESS);
  REQUIRE(f.unmap(range, page) == CUDA_SUCCESS);
  REQUIRE(f.release(handle) == CUDA_SUCCESS);
  REQUIRE(f.address_free(range, page) == CUDA_SUCCESS);
  CUdeviceptr block = 0;
  REQUIRE(f.alloc(&block, 1 << 20) == CUDA_SUCCESS);
  REQUIRE(f.free(block) == CUDA_SUCCESS);
  REQUIRE(f.alloc_async(&block, 1 << 20, nullptr) == CUDA_SUCCESS);
  REQUIRE(f.free_async(block, nullptr) == CUDA_SUCCESS);
  if (f.ctx_synchronize != nullptr) REQUIRE(f.ctx_synchronize() == CUDA_SUCCESS);
  REQUIRE(f.stream_synchronize(nullptr) == CUDA_SUCCESS);
  CUevent event = nullptr;
  REQUIRE(cuEventCreate(&event, 0) == CUDA_SUCCESS);
  REQUIRE(cuEventRecord(event, nullptr) == CUDA_SUCCESS);
  REQUIRE(f.event_synchronize(event) == CUDA_SUCCESS);
  REQUIRE(cuEventDestroy(event) == CUDA_SUCCESS);
}

std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> counts(count_function interposer) {
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> out;
  for (const char* name : counted_names) out[name] = {simcuda_call_count(name), interposer(name)};
  return out;
}

}  // namespace

TEST_CASE("the counting interposer counts each function as simcuda does, by export and by entry point",
          "[bench][counting]") {
  const auto interposer = reinterpret_cast<count_function>(dlsym(RTLD_DEFAULT, "fragless_bench_counting_calls"));
  REQUIRE(interposer != nullptr);  // the test runs with libfragless_bench_counting.so preloaded
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  const auto before = counts(interposer);

  void* pointer = nullptr;
  REQUIRE(cudaMalloc(&pointer, 1 << 20) == cudaSuccess);
  REQUIRE(cudaFree(pointer) == cudaSuccess);
  REQUIRE(cudaMallocAsync(&pointer, 1 << 20, nullptr) == cudaSuccess);
  REQUIRE(cudaFreeAsync(pointer, nullptr) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(nullptr) == cudaSuccess);
  cudaEvent_t event = nullptr;
  REQUIRE(cudaEventCreate(&event) == cudaSuccess);
  REQUIRE(cudaEventRecord(event, nullptr) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(nullptr, event, 0) == cudaSuccess);
  REQUIRE(cudaEventSynchronize(event) == cudaSuccess);
  REQUIRE(cudaEventQuery(event) == cudaSuccess);
  REQUIRE(cudaEventDestroy(event) == cudaSuccess);
  for (way how : {way::exports, way::get_proc_address, way::entry_point_by_version, way::entry_point}) {
    exercise(functions_by(how));
  }

  const auto after = counts(interposer);
  for (const char* name : counted_names) {
    INFO(name);
    const std::uint64_t simcuda_calls = after.at(name).first - before.at(name).first;
    const std::uint64_t counted_calls = after.at(name).second - before.at(name).second;
    CHECK(counted_calls == simcuda_calls);
    const std::string function = name;
    const std::uint64_t expected = function.rfind("cuda", 0) == 0 ? 1 : function == "cuCtxSynchronize" ? 3 : 4;
    CHECK(simcuda_calls == expected);
  }
}
