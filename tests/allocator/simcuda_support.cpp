// Helpers for allocator tests on simcuda (see simcuda_support.hpp).
#include "simcuda_support.hpp"

#include "backend/capture_aware_backend.hpp"

#include <cuda_runtime_api.h>
#include <simcuda/control.h>

#include <cstdlib>
#include <cstring>
#include <vector>

namespace fragless::testing {

std::unique_ptr<core::allocator> make_simcuda_allocator(const core::cache_settings& settings) {
  return std::make_unique<core::allocator>(backend::make_capture_aware(backend::make_cuda_backend()), settings);
}

void* create_stream(int device) {
  int previous = 0;
  cudaGetDevice(&previous);
  cudaSetDevice(device);
  cudaStream_t stream = nullptr;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) stream = nullptr;
  cudaSetDevice(previous);
  return stream;
}

void destroy_stream(void* stream) { cudaStreamDestroy(static_cast<cudaStream_t>(stream)); }

void reset_simcuda() {
  simcuda_set_auto_complete(0);
  simcuda_complete_all();
  simcuda_clear_faults();
  simcuda_race_reset();
  simcuda_reset_counters();
}

namespace {
// Sample up to 64 words spread over the block: enough to see overlap, cheap for big blocks.
template <typename F>
void for_each_probe(std::size_t bytes, F&& f) {
  const std::size_t words = bytes / 8;
  if (words == 0) return;
  const std::size_t step = words <= 64 ? 1 : words / 64;
  for (std::size_t word = 0; word < words; word += step) f(word);
  f(words - 1);
}
}  // namespace

void fill_pattern(void* block, std::size_t bytes, std::uint64_t seed) {
  auto* words = static_cast<std::uint64_t*>(block);
  for_each_probe(bytes, [&](std::size_t word) { words[word] = seed * 0x9E3779B97F4A7C15ull + word; });
}

bool check_pattern(const void* block, std::size_t bytes, std::uint64_t seed) {
  const auto* words = static_cast<const std::uint64_t*>(block);
  bool ok = true;
  for_each_probe(bytes, [&](std::size_t word) { ok = ok && words[word] == seed * 0x9E3779B97F4A7C15ull + word; });
  return ok;
}

std::string race_report() {
  std::vector<char> text(simcuda_race_report(nullptr, 0) + 1);
  simcuda_race_report(text.data(), text.size());
  return text.data();
}

void order_streams(void* waiter, void* source) {
  if (waiter == source) return;
  cudaEvent_t event = nullptr;
  cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  cudaEventRecord(event, static_cast<cudaStream_t>(source));
  cudaStreamWaitEvent(static_cast<cudaStream_t>(waiter), event, 0);
  cudaEventDestroy(event);
}

long operations_from_env(long fallback) {
  const char* text = std::getenv("FRAGLESS_TEST_OPS");
  if (text == nullptr) return fallback;
  const long value = std::strtol(text, nullptr, 10);
  return value > 0 ? value : fallback;
}

std::int64_t device_calls(const device_stats& stats) {
  return stats.num_map + stats.num_unmap + stats.num_device_alloc + stats.num_device_free;
}

std::vector<std::size_t> chunk_bytes_under(core::device_cache& cache, void* block, std::size_t bytes) {
  std::vector<std::size_t> chunks;
  for (const auto& piece : cache.shared_pieces(reinterpret_cast<std::uintptr_t>(block), bytes))
    chunks.push_back(piece.bytes);
  return chunks;
}

}  // namespace fragless::testing
