// The C++ API (fragless/fragless.hpp): forwarders to the global allocator.
#include "core/allocator.hpp"
#include "core/segment_events.hpp"
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

void set_segment_observer(segment_observer observer, void* context) {
  core::install_segment_observer(observer, context);
}

compact_result compact(int device) {
  compact_result total;
  for (core::device_cache* cache : targets(device)) {
    const compact_result one = cache->compact();
    total.released_bytes += one.released_bytes;
    total.unmapped_pages += one.unmapped_pages;
  }
  return total;
}

void set_memory_fraction(double fraction, int device) { global().device(device).set_memory_fraction(fraction); }
void reset_peak_stats(int device) { global().device(device).reset_peak_stats(); }
void reset_accumulated_stats(int device) { global().device(device).reset_accumulated_stats(); }
device_stats get_device_stats(int device) { return global().device(device).stats(); }
device_stats get_device_counters(int device) { return global().device(device).stats(false); }
memory_snapshot snapshot(int device) { return global().device(device).snapshot(); }
std::string snapshot_json(int device) { return to_json(snapshot(device)); }
std::string snapshot_pickle(int device) { return to_pytorch_pickle(snapshot(device)); }
std::string stats_json(int device) { return to_json(get_device_stats(device), device); }
std::string backend_name(int device) { return global().device(device).backend_name(); }

std::string memory_summary(int device) { return memory_summary(get_device_stats(device), device); }

}  // namespace fragless
