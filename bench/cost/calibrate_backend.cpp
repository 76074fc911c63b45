// calibrate_backend: see header. Driver entry points come from
// cudaGetDriverEntryPointByVersion, as in the allocator's backend.
#include "calibrate_backend.hpp"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace fragless::bench {

namespace {

using clock_type = std::chrono::steady_clock;

template <typename F>
bool load(const char* symbol, F* function) {
  void* pointer = nullptr;
  cudaDriverEntryPointQueryResult query = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(symbol, &pointer, 12000, cudaEnableDefault, &query) != cudaSuccess ||
      query != cudaDriverEntryPointSuccess || pointer == nullptr) {
    cudaGetLastError();
    return false;
  }
  *function = reinterpret_cast<F>(pointer);
  return true;
}

struct driver_calls {
  PFN_cuMemCreate_v10020 create = nullptr;
  PFN_cuMemRelease_v10020 release = nullptr;
  PFN_cuMemAddressReserve_v10020 reserve = nullptr;
  PFN_cuMemAddressFree_v10020 address_free = nullptr;
  PFN_cuMemMap_v10020 map = nullptr;
  PFN_cuMemUnmap_v10020 unmap = nullptr;
  PFN_cuMemSetAccess_v10020 set_access = nullptr;
  bool loaded() {
    return load("cuMemCreate", &create) && load("cuMemRelease", &release) && load("cuMemAddressReserve", &reserve) &&
           load("cuMemAddressFree", &address_free) && load("cuMemMap", &map) && load("cuMemUnmap", &unmap) &&
           load("cuMemSetAccess", &set_access);
  }
};

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

template <typename F>
double timed_ns(F&& call, bool& ok) {
  const auto start = clock_type::now();
  ok = call() && ok;
  return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now() - start).count());
}

enum index : std::size_t {
  cuda_malloc, cuda_free, mem_create, mem_release, mem_map, mem_unmap, mem_set_access, address_reserve, address_free
};

}  // namespace

calibration calibrate_device_calls(int repetitions) {
  calibration result;
  int device = 0;
  cudaDeviceProp properties{};
  if (cudaSetDevice(0) != cudaSuccess || cudaFree(nullptr) != cudaSuccess ||
      cudaGetDeviceProperties(&properties, device) != cudaSuccess) {
    result.error = std::string("no usable CUDA device: ") + cudaGetErrorString(cudaGetLastError());
    return result;
  }
  result.device = properties.name;
  driver_calls driver;
  if (!driver.loaded()) {
    result.error = "the CUDA driver lacks the virtual memory management calls";
    return result;
  }
  std::size_t free_bytes = 0, total_bytes = 0;
  cudaMemGetInfo(&free_bytes, &total_bytes);
  const std::uint64_t mib = std::uint64_t{1} << 20;
  std::vector<std::uint64_t> sizes = {512, 4096, 512 * 1024, 2 * mib, 32 * mib, 512 * mib, 2048 * mib};
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  bool ok = true;
  for (std::uint64_t size : sizes) {
    if (size * 2 > free_bytes) continue;
    std::vector<std::vector<double>> samples(costed_function_count);
    for (int r = 0; r < repetitions && ok; ++r) {
      void* pointer = nullptr;
      samples[cuda_malloc].push_back(timed_ns([&] { return cudaMalloc(&pointer, size) == cudaSuccess; }, ok));
      samples[cuda_free].push_back(timed_ns([&] { return cudaFree(pointer) == cudaSuccess; }, ok));
      if (size % (2 * mib) != 0) continue;  // VMM sizes are multiples of the 2 MiB granule
      CUdeviceptr base = 0;
      CUmemGenericAllocationHandle handle = 0;
      samples[address_reserve].push_back(timed_ns([&] { return driver.reserve(&base, size, 0, 0, 0) == CUDA_SUCCESS; }, ok));
      samples[mem_create].push_back(timed_ns([&] { return driver.create(&handle, size, &prop, 0) == CUDA_SUCCESS; }, ok));
      samples[mem_map].push_back(timed_ns([&] { return driver.map(base, size, 0, handle, 0) == CUDA_SUCCESS; }, ok));
      samples[mem_set_access].push_back(timed_ns([&] { return driver.set_access(base, size, &access, 1) == CUDA_SUCCESS; }, ok));
      samples[mem_unmap].push_back(timed_ns([&] { return driver.unmap(base, size) == CUDA_SUCCESS; }, ok));
      samples[mem_release].push_back(timed_ns([&] { return driver.release(handle) == CUDA_SUCCESS; }, ok));
      samples[address_free].push_back(timed_ns([&] { return driver.address_free(base, size) == CUDA_SUCCESS; }, ok));
    }
    for (std::size_t f = 0; f < costed_function_count; ++f) {
      if (!samples[f].empty()) result.table.points[f].push_back(cost_point{size, median(samples[f])});
    }
  }
  if (!ok) result.error = std::string("a device call failed during calibration: ") + cudaGetErrorString(cudaGetLastError());
  return result;
}

}  // namespace fragless::bench
