// device_counters: simcuda's control API or the counting interposer, through dlsym (see
// header and Note [Counting device calls]).
#include "device_counters.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace fragless::bench {

namespace {

struct control_api {
  std::uint64_t (*call_count)(const char*) = nullptr;
  void (*reset_counters)() = nullptr;
  std::uint64_t (*used_bytes)(int) = nullptr;
  int (*set_capacity)(int, std::uint64_t) = nullptr;
  int (*set_cost_ns)(const char*, std::uint64_t) = nullptr;
  void (*set_auto_complete)(int) = nullptr;
  int (*time_calls)(const char*, int) = nullptr;
  std::uint64_t (*thread_emulation_ns)() = nullptr;
  bool loaded() const { return call_count != nullptr && reset_counters != nullptr && used_bytes != nullptr; }
};

struct interposer_api {
  std::uint64_t (*calls)(const char*) = nullptr;
  void (*reset)() = nullptr;
  std::uint64_t (*memory_calls)() = nullptr;
  bool loaded() const { return calls != nullptr && reset != nullptr && memory_calls != nullptr; }
};

template <typename F>
void resolve(void* library, const char* symbol, F& out) {
  out = reinterpret_cast<F>(dlsym(library, symbol));
}

const control_api& simcuda() {
  static const control_api loaded = [] {
    control_api a;
    // Loading the driver library does not start CUDA; simcuda's libcuda.so.1 adds the
    // control API, a real one has none of these symbols.
    void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (library == nullptr) return a;
    resolve(library, "simcuda_call_count", a.call_count);
    resolve(library, "simcuda_reset_counters", a.reset_counters);
    resolve(library, "simcuda_used_bytes", a.used_bytes);
    resolve(library, "simcuda_set_capacity", a.set_capacity);
    resolve(library, "simcuda_set_cost_ns", a.set_cost_ns);
    resolve(library, "simcuda_set_auto_complete", a.set_auto_complete);
    resolve(library, "simcuda_time_calls", a.time_calls);
    resolve(library, "simcuda_thread_emulation_ns", a.thread_emulation_ns);
    return a;
  }();
  return loaded;
}

// The interposer is LD_PRELOADed, so its API is in the global scope.
const interposer_api& interposer() {
  static const interposer_api loaded = [] {
    interposer_api a;
    resolve(RTLD_DEFAULT, "fragless_bench_counting_calls", a.calls);
    resolve(RTLD_DEFAULT, "fragless_bench_counting_reset", a.reset);
    resolve(RTLD_DEFAULT, "fragless_bench_counting_memory_calls", a.memory_calls);
    return a;
  }();
  return loaded;
}

std::uint64_t calls_of(counting_source source, const char* name) {
  switch (source) {
    case counting_source::simcuda: return simcuda().call_count(name);
    case counting_source::interposer: return interposer().calls(name);
    case counting_source::none: break;
  }
  return 0;
}

std::uint64_t sum_counts(counting_source source, const char* const* names) {
  std::uint64_t total = 0;
  for (; *names != nullptr; ++names) total += calls_of(source, *names);
  return total;
}

}  // namespace

bool device_counters::simcuda_control_loaded() { return simcuda().loaded(); }

const char* device_counters::requested_source() {
  static const char* const requested = [] {
    const char* value = std::getenv("FRAGLESS_BENCH_COUNTING");
    if (value == nullptr || *value == '\0' || std::strcmp(value, "auto") == 0) return "auto";
    if (std::strcmp(value, "simcuda") == 0) return "simcuda";
    if (std::strcmp(value, "interposer") == 0) return "interposer";
    std::fprintf(stderr, "fragless-bench: warning: FRAGLESS_BENCH_COUNTING=%s is not auto, simcuda or interposer; using auto\n",
                 value);
    return "auto";
  }();
  return requested;
}

device_counters::device_counters(device_used_bytes_reader reader) : reader_(reader) {
  const std::string_view requested = requested_source();
  const bool simcuda_ok = requested != "interposer" && simcuda().loaded();
  const bool interposer_ok = requested != "simcuda" && interposer().loaded();
  if (simcuda_ok) source_ = counting_source::simcuda;
  else if (interposer_ok) source_ = counting_source::interposer;
}

void device_counters::reset() const {
  if (source_ == counting_source::simcuda) simcuda().reset_counters();
  if (source_ == counting_source::interposer) interposer().reset();
}

device_call_counts device_counters::read() const {
  device_call_counts counts;
  if (source_ == counting_source::none) return counts;
  static const char* const allocs[] = {"cudaMalloc", "cuMemCreate", "cudaMallocAsync", "cuMemAlloc", "cuMemAlloc_v2",
                                       "cuMemAllocAsync", nullptr};
  static const char* const frees[] = {"cudaFree", "cuMemRelease", "cudaFreeAsync", "cuMemFree", "cuMemFree_v2",
                                      "cuMemFreeAsync", nullptr};
  static const char* const maps[] = {"cuMemMap", nullptr};
  static const char* const unmaps[] = {"cuMemUnmap", nullptr};
  static const char* const syncs[] = {"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
                                      "cuCtxSynchronize", "cuCtxSynchronize_v2", "cuStreamSynchronize",
                                      "cuEventSynchronize", nullptr};
  counts.allocs = sum_counts(source_, allocs);
  counts.frees = sum_counts(source_, frees);
  counts.maps = sum_counts(source_, maps);
  counts.unmaps = sum_counts(source_, unmaps);
  counts.syncs = sum_counts(source_, syncs);
  return counts;
}

std::uint64_t device_counters::count(const char* function_name) const { return calls_of(source_, function_name); }

std::uint64_t device_counters::memory_generation() const {
  switch (source_) {
    case counting_source::simcuda: return simcuda().used_bytes(0);
    case counting_source::interposer: return interposer().memory_calls();
    case counting_source::none: break;
  }
  return 0;
}

std::uint64_t device_counters::used_bytes() const {
  if (source_ == counting_source::simcuda) return simcuda().used_bytes(0);
  if (reader_ == nullptr) return 0;
  // Note [Memory generation]: cudaMemGetInfo only after a call that may have changed it.
  const std::uint64_t generation = memory_generation();
  if (source_ == counting_source::none || generation != cached_generation_) {
    std::uint64_t used = 0;
    if (reader_(&used)) cached_used_bytes_ = used;
    cached_generation_ = generation;
  }
  return cached_used_bytes_;
}

bool device_counters::set_capacity(std::uint64_t bytes) const {
  return simulated() && simcuda().set_capacity != nullptr && simcuda().set_capacity(0, bytes) == 0;
}

bool device_counters::set_call_cost_ns(const char* function_name, std::uint64_t nanoseconds) const {
  return simulated() && simcuda().set_cost_ns != nullptr && simcuda().set_cost_ns(function_name, nanoseconds) == 0;
}

void device_counters::set_auto_complete(bool on) const {
  if (simulated() && simcuda().set_auto_complete != nullptr) simcuda().set_auto_complete(on ? 1 : 0);
}

bool device_counters::time_emulation(const char* function_name) const {
  return simulated() && simcuda().time_calls != nullptr && simcuda().thread_emulation_ns != nullptr &&
         simcuda().time_calls(function_name, 1) == 0;
}

std::uint64_t device_counters::thread_emulation_ns() const {
  return simulated() && simcuda().thread_emulation_ns != nullptr ? simcuda().thread_emulation_ns() : 0;
}

}  // namespace fragless::bench
