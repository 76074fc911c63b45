// calibrate_backend: see header. Driver entry points come from the allocator's resolver
// (backend/driver_entry_points.hpp), so both measure and use the same calls.
#include "calibrate_backend.hpp"
#include "report/median.hpp"

#include "backend/driver_entry_points.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace fragless::bench {

namespace {

using clock_type = std::chrono::steady_clock;

template <typename F>
double timed_ns(F&& call, bool& ok) {
  const auto start = clock_type::now();
  ok = call() && ok;
  return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now() - start).count());
}

enum index : std::size_t {
  cuda_malloc, cuda_free, mem_create, mem_release, mem_map, mem_unmap, mem_set_access, address_reserve, address_free,
  event_record, stream_wait_event, event_query
};

// The calls that order one stream after another's work (Note [Stream reuse], Note [Shared
// records]): an event recorded on one idle stream, a second stream waiting on it, a query.
bool measure_stream_order(int repetitions, calibration& result) {
  cudaStream_t source = nullptr, waiter = nullptr;
  cudaEvent_t event = nullptr;
  bool ok = cudaStreamCreateWithFlags(&source, cudaStreamNonBlocking) == cudaSuccess &&
            cudaStreamCreateWithFlags(&waiter, cudaStreamNonBlocking) == cudaSuccess &&
            cudaEventCreateWithFlags(&event, cudaEventDisableTiming) == cudaSuccess;
  std::vector<double> record, wait, query;
  for (int r = 0; r < repetitions && ok; ++r) {
    record.push_back(timed_ns([&] { return cudaEventRecord(event, source) == cudaSuccess; }, ok));
    wait.push_back(timed_ns([&] { return cudaStreamWaitEvent(waiter, event, 0) == cudaSuccess; }, ok));
    query.push_back(timed_ns([&] { return cudaEventQuery(event) != cudaErrorInvalidResourceHandle; }, ok));
  }
  if (ok) ok = cudaStreamSynchronize(waiter) == cudaSuccess;
  if (event != nullptr) cudaEventDestroy(event);
  if (waiter != nullptr) cudaStreamDestroy(waiter);
  if (source != nullptr) cudaStreamDestroy(source);
  // Note [Cost model]: sizeless, one price each at 1 byte.
  if (ok) {
    result.table.points[event_record] = {cost_point{1, median(record)}};
    result.table.points[stream_wait_event] = {cost_point{1, median(wait)}};
    result.table.points[event_query] = {cost_point{1, median(query)}};
  }
  return ok;
}

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
  const backend::driver_entry_points driver = backend::load_driver_entry_points();
  if (!driver.complete) {
    result.error = "the CUDA driver lacks the virtual memory management calls";
    return result;
  }
  std::size_t free_bytes = 0, total_bytes = 0;
  cudaMemGetInfo(&free_bytes, &total_bytes);
  const std::uint64_t mib = std::uint64_t{1} << 20;
  std::vector<std::uint64_t> sizes = {512, 4096, 512 * 1024, 2 * mib, 32 * mib, 512 * mib, 2048 * mib};
  const CUmemAllocationProp prop = backend::device_allocation_prop(device);
  const CUmemAccessDesc access = backend::device_read_write_access(device);
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
      samples[address_reserve].push_back(timed_ns([&] { return driver.address_reserve(&base, size, 0, 0, 0) == CUDA_SUCCESS; }, ok));
      samples[mem_create].push_back(timed_ns([&] { return driver.mem_create(&handle, size, &prop, 0) == CUDA_SUCCESS; }, ok));
      samples[mem_map].push_back(timed_ns([&] { return driver.mem_map(base, size, 0, handle, 0) == CUDA_SUCCESS; }, ok));
      samples[mem_set_access].push_back(timed_ns([&] { return driver.set_access(base, size, &access, 1) == CUDA_SUCCESS; }, ok));
      samples[mem_unmap].push_back(timed_ns([&] { return driver.mem_unmap(base, size) == CUDA_SUCCESS; }, ok));
      samples[mem_release].push_back(timed_ns([&] { return driver.mem_release(handle) == CUDA_SUCCESS; }, ok));
      samples[address_free].push_back(timed_ns([&] { return driver.address_free(base, size) == CUDA_SUCCESS; }, ok));
    }
    for (std::size_t f = 0; f < costed_function_count; ++f) {
      if (!samples[f].empty()) result.table.points[f].push_back(cost_point{size, median(samples[f])});
    }
  }
  if (ok) ok = measure_stream_order(repetitions * 10, result);
  if (!ok) result.error = std::string("a device call failed during calibration: ") + cudaGetErrorString(cudaGetLastError());
  return result;
}

}  // namespace fragless::bench
