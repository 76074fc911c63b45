// device_counters: simcuda control API through dlsym (see header).
#include "device_counters.hpp"

#include <dlfcn.h>

namespace fragless::bench {

namespace {

struct control_api {
  std::uint64_t (*call_count)(const char*) = nullptr;
  void (*reset_counters)() = nullptr;
  std::uint64_t (*used_bytes)(int) = nullptr;
  int (*set_capacity)(int, std::uint64_t) = nullptr;
  int (*set_cost_ns)(const char*, std::uint64_t) = nullptr;
  void (*set_auto_complete)(int) = nullptr;
};

template <typename F>
void resolve(void* library, const char* symbol, F& out) {
  out = reinterpret_cast<F>(dlsym(library, symbol));
}

const control_api& api() {
  static const control_api loaded = [] {
    control_api a;
    void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (library == nullptr) return a;
    resolve(library, "simcuda_call_count", a.call_count);
    resolve(library, "simcuda_reset_counters", a.reset_counters);
    resolve(library, "simcuda_used_bytes", a.used_bytes);
    resolve(library, "simcuda_set_capacity", a.set_capacity);
    resolve(library, "simcuda_set_cost_ns", a.set_cost_ns);
    resolve(library, "simcuda_set_auto_complete", a.set_auto_complete);
    return a;
  }();
  return loaded;
}

std::uint64_t sum_counts(const char* const* names) {
  std::uint64_t total = 0;
  for (; *names != nullptr; ++names) total += api().call_count(*names);
  return total;
}

}  // namespace

device_counters::device_counters() {
  const control_api& a = api();
  available_ = a.call_count != nullptr && a.reset_counters != nullptr && a.used_bytes != nullptr;
}

void device_counters::reset() const {
  if (available_) api().reset_counters();
}

device_call_counts device_counters::read() const {
  device_call_counts counts;
  if (!available_) return counts;
  static const char* const allocs[] = {"cudaMalloc", "cuMemCreate", "cudaMallocAsync", "cuMemAlloc", "cuMemAlloc_v2",
                                       "cuMemAllocAsync", nullptr};
  static const char* const frees[] = {"cudaFree", "cuMemRelease", "cudaFreeAsync", "cuMemFree", "cuMemFree_v2",
                                      "cuMemFreeAsync", nullptr};
  static const char* const maps[] = {"cuMemMap", nullptr};
  static const char* const unmaps[] = {"cuMemUnmap", nullptr};
  static const char* const syncs[] = {"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
                                      "cuCtxSynchronize", "cuCtxSynchronize_v2", "cuStreamSynchronize",
                                      "cuEventSynchronize", nullptr};
  counts.allocs = sum_counts(allocs);
  counts.frees = sum_counts(frees);
  counts.maps = sum_counts(maps);
  counts.unmaps = sum_counts(unmaps);
  counts.syncs = sum_counts(syncs);
  return counts;
}

std::uint64_t device_counters::count(const char* function_name) const {
  return available_ ? api().call_count(function_name) : 0;
}

std::uint64_t device_counters::used_bytes() const {
  return available_ ? api().used_bytes(0) : 0;
}

bool device_counters::set_capacity(std::uint64_t bytes) const {
  return api().set_capacity != nullptr && api().set_capacity(0, bytes) == 0;
}

bool device_counters::set_call_cost_ns(const char* function_name, std::uint64_t nanoseconds) const {
  return api().set_cost_ns != nullptr && api().set_cost_ns(function_name, nanoseconds) == 0;
}

void device_counters::set_auto_complete(bool on) const {
  if (api().set_auto_complete != nullptr) api().set_auto_complete(on ? 1 : 0);
}

}  // namespace fragless::bench
