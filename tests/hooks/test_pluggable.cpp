// libfragless.so used the way PyTorch's CUDAPluggableAllocator uses it: loaded with dlopen by
// path, fragless_malloc / fragless_free looked up by name, and the optional functions called
// through the exact signatures of its set_*_fn setters. Runs on simcuda.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstring>
#include <string>
#include <vector>

#include "simcuda/control.h"

namespace {

struct pluggable {
  void* library = nullptr;
  void* (*malloc)(size_t, int, cudaStream_t) = nullptr;
  void (*free)(void*, size_t, int, cudaStream_t) = nullptr;
  void (*init)(int) = nullptr;
  void (*reset)() = nullptr;
  void (*memory_fraction)(double, int) = nullptr;
  void (*record_stream)(void*, cudaStream_t) = nullptr;
  void* (*base_alloc)(void*, size_t*) = nullptr;
  int (*figures)(int, long long*) = nullptr;  // fragless_get_memory_figures, first field read only
  const char* (*last_error)() = nullptr;

  template <typename F>
  void find(F& slot, const char* name) {
    slot = reinterpret_cast<F>(dlsym(library, name));
    INFO(name);
    REQUIRE(slot != nullptr);
  }

  pluggable() {
    library = dlopen(FRAGLESS_LIBRARY_PATH, RTLD_NOW | RTLD_LOCAL);
    INFO(dlerror());
    REQUIRE(library != nullptr);
    find(malloc, "fragless_malloc");
    find(free, "fragless_free");
    find(init, "fragless_pluggable_init");
    find(reset, "fragless_pluggable_reset");
    find(memory_fraction, "fragless_pluggable_set_memory_fraction");
    find(record_stream, "fragless_pluggable_record_stream");
    find(base_alloc, "fragless_pluggable_base_alloc");
    find(figures, "fragless_get_memory_figures");
    find(last_error, "fragless_last_error");
  }

  long long allocated_bytes() {
    long long values[16] = {};
    REQUIRE(figures(0, values) == 0);
    return values[0];
  }
};

}  // namespace

TEST_CASE("libfragless.so serves PyTorch's pluggable allocator calls", "[pluggable]") {
  cudaDeviceProp properties{};
  REQUIRE(cudaGetDeviceProperties(&properties, 0) == cudaSuccess);
  REQUIRE(std::string(properties.name).find("simcuda") != std::string::npos);
  pluggable torch_side;
  torch_side.init(1);

  cudaStream_t compute = nullptr;
  cudaStream_t copy = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking) == cudaSuccess);

  // Tensors of typical sizes on the compute stream, as caching_allocator_alloc would ask.
  std::vector<std::pair<void*, size_t>> tensors;
  long long expected = 0;
  for (size_t size : {size_t{4}, size_t{2048}, size_t{1} << 20, size_t{6} << 20, size_t{3} << 20}) {
    void* block = torch_side.malloc(size, 0, compute);
    REQUIRE(block != nullptr);
    std::memset(block, 1, size);
    tensors.emplace_back(block, size);
    expected += static_cast<long long>((size + 511) / 512 * 512);
  }
  CHECK(torch_side.allocated_bytes() >= expected);

  // base_alloc: an interior pointer maps to its block.
  size_t base_size = 0;
  auto* inside = static_cast<char*>(tensors[3].first) + 12345;
  CHECK(torch_side.base_alloc(inside, &base_size) == tensors[3].first);
  CHECK(base_size >= tensors[3].second);
  int on_stack = 0;
  CHECK(torch_side.base_alloc(&on_stack, &base_size) == nullptr);
  CHECK(std::string(torch_side.last_error()).find("not inside") != std::string::npos);

  // tensor.record_stream(copy): the block is not reused before the copy stream's work.
  simcuda_race_reset();
  simcuda_launch(copy, tensors[2].first, tensors[2].second, 1);
  torch_side.record_stream(tensors[2].first, copy);
  for (auto& [block, size] : tensors) torch_side.free(block, size, 0, compute);
  for (int i = 0; i < 8; ++i) {
    void* again = torch_side.malloc(1 << 20, 0, compute);
    REQUIRE(again != nullptr);
    simcuda_launch(compute, again, 1 << 20, 1);
    torch_side.free(again, 1 << 20, 0, compute);
  }
  simcuda_complete_all();
  CHECK(simcuda_race_count() == 0);
  CHECK(torch_side.allocated_bytes() == 0);

  // torch.cuda.set_per_process_memory_fraction and empty_cache.
  torch_side.memory_fraction(0.5, 0);
  void* too_big = torch_side.malloc(static_cast<size_t>(simcuda_capacity(0) / 4 * 3), 0, compute);
  CHECK(too_big == nullptr);
  CHECK(std::string(torch_side.last_error()).rfind("CUDA out of memory", 0) == 0);
  torch_side.memory_fraction(1.0, 0);
  torch_side.reset();
  CHECK(simcuda_used_bytes(0) == 0);

  cudaStreamDestroy(compute);
  cudaStreamDestroy(copy);
}
