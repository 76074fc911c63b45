// The C++ API (fragless/fragless.hpp): forwarders to the global allocator.
#include <cinttypes>
#include <cstdio>

#include "core/allocator.hpp"
#include "fragless/fragless.hpp"

namespace fragless {
namespace {

core::allocator& global() { return core::global_allocator(); }

std::vector<core::device_cache*> targets(int device) {
  if (device >= 0) return {&global().device(device)};
  return global().created_devices();
}

}  // namespace

void* allocate(std::size_t size_bytes, int device, stream_t stream) {
  return global().allocate(size_bytes, device, stream);
}

void deallocate(void* pointer) { global().deallocate(pointer); }

void record_stream(void* pointer, stream_t stream) { global().record_stream(pointer, stream); }

std::size_t empty_cache(int device) {
  std::size_t released = 0;
  for (core::device_cache* cache : targets(device)) released += cache->release_cache(0);
  return released;
}

std::size_t trim(std::size_t bytes_to_keep, int device) {
  std::size_t released = 0;
  for (core::device_cache* cache : targets(device)) released += cache->release_cache(bytes_to_keep);
  return released;
}

void set_memory_fraction(double fraction, int device) { global().device(device).set_memory_fraction(fraction); }
void reset_peak_stats(int device) { global().device(device).reset_peak_stats(); }
void reset_accumulated_stats(int device) { global().device(device).reset_accumulated_stats(); }
usage_stats get_device_stats(int device) { return global().device(device).stats(); }
device_snapshot snapshot(int device) { return global().device(device).snapshot(); }
std::string backend_name(int device) { return global().device(device).backend_name(); }

std::string memory_summary(int device) {
  const usage_stats stats = get_device_stats(device);
  std::string text = "fragless memory summary, device ID " + std::to_string(device) + "\n";
  char line[256];
  std::snprintf(line, sizeof line, "CUDA OOMs: %" PRId64 " | cudaMalloc retries: %" PRId64 "\n", stats.num_ooms,
                stats.num_alloc_retries);
  text += line;
  auto row = [&](const char* name, const pool_stat& s) {
    std::snprintf(line, sizeof line, "%-24s cur %14" PRId64 "  peak %14" PRId64 "  alloc %14" PRId64
                  "  freed %14" PRId64 "\n", name, s[pool_all].current, s[pool_all].peak, s[pool_all].allocated,
                  s[pool_all].freed);
    text += line;
  };
  row("Allocated memory", stats.allocated_bytes);
  row("Active memory", stats.active_bytes);
  row("Requested memory", stats.requested_bytes);
  row("GPU reserved memory", stats.reserved_bytes);
  row("Non-releasable memory", stats.inactive_split_bytes);
  row("Allocations", stats.allocation);
  row("Active allocs", stats.active);
  row("GPU reserved segments", stats.segment);
  row("Non-releasable allocs", stats.inactive_split);
  return text;
}

}  // namespace fragless
