// The C++ API (fragless/fragless.hpp): forwarders to the global allocator.
#include "backend/capture_aware_backend.hpp"
#include "core/allocator.hpp"
#include "core/segment_events.hpp"
#include "fragless/fragless.hpp"

namespace fragless {
namespace {

core::allocator& global() { return core::global_allocator(); }

// Note [Device arguments]
// The control calls that act on one device or on all -- empty_cache, trim, compact,
// reset_peak_stats, reset_accumulated_stats, in the C++ API and the C ABI alike -- take a
// device index or -1, meaning every device used so far (one not used yet has nothing to
// empty or reset). Any other negative value, like an index past the last device, is an
// invalid argument (invalid_argument_error, FRAGLESS_ERROR_INVALID_ARGUMENT) and changes
// nothing. Calls that read or allocate (stats, snapshots, allocate) take an index only.
//
// f(device_cache&) for the device's caches (its own and its pools'); for every created
// device when device is -1.
template <typename F>
void for_each_target(int device, F&& f) {
  if (device >= 0) return global().for_each_cache(device, f);
  if (device != -1)
    throw invalid_argument_error("fragless: device " + std::to_string(device) +
                                 " is not a device (an index, or -1 for every device)");
  for (core::device_cache* created : global().created_devices()) global().for_each_cache(created->device(), f);
}


}  // namespace

void* allocate(std::size_t size_bytes, int device, stream_t stream) {
  return global().allocate(size_bytes, device, stream);
}

void deallocate(void* pointer) { global().deallocate(pointer); }

void record_stream(void* pointer, stream_t stream) { global().record_stream(pointer, stream); }
void retire_stream(stream_t stream) noexcept {
  // A stream destroyed before fragless allocated anything has nothing to retire.
  if (core::allocator* instance = core::global_allocator_if_created()) instance->retire_stream(stream);
}

std::string export_block(void* pointer) { return global().export_block(pointer); }
void* import_block(const std::string& handle) { return global().import_block(handle); }
void close_imported_block(void* pointer) noexcept { global().close_imported_block(pointer); }

void begin_capture() noexcept {
  // Note [Dormant mappings]: a capture refuses unmaps, and a block placed over a dormant
  // range needs one; so they are made before it begins. From the setup's start no move
  // leaves a new one (each cache's flush takes its lock after the setup count is raised).
  backend::enter_capture_setup();
  if (core::allocator* instance = core::global_allocator_if_created()) {
    try {
      for (core::device_cache* created : instance->created_devices())
        instance->for_each_cache(created->device(), [](core::device_cache& cache) { cache.unmap_dormant_ranges(); });
    } catch (...) {
      // No host memory to list the caches: a later unmap the capture refuses fails that
      // allocation's mapping, as any refused call does.
    }
  }
  backend::enter_capture();
  backend::leave_capture_setup();
}
void end_capture() noexcept { backend::leave_capture(); }

pool_id create_pool(int device) { return global().create_pool(device); }

void* allocate_from_pool(pool_id pool, std::size_t size_bytes, stream_t stream) {
  return global().allocate_from_pool(pool, size_bytes, stream);
}

void release_pool(pool_id pool) noexcept { global().release_pool(pool); }

std::size_t empty_pool_cache(pool_id pool) { return global().pool_cache(pool).release_cache(0); }

std::size_t empty_cache(int device) {
  std::size_t released = 0;
  for_each_target(device, [&](core::device_cache& cache) { released += cache.release_cache(0); });
  return released;
}

std::size_t empty_cache_keeping_live_pools(int device) {
  std::size_t released = 0;
  const auto release = [&](core::device_cache& cache) { released += cache.release_cache(0); };
  if (device >= 0) {
    global().for_each_cache_but_live_pools(device, release);
  } else {
    for (core::device_cache* created : global().created_devices())
      global().for_each_cache_but_live_pools(created->device(), release);
  }
  return released;
}

std::size_t trim(std::size_t bytes_to_keep, int device) {
  std::size_t released = 0;
  for_each_target(device, [&](core::device_cache& cache) { released += cache.release_cache(bytes_to_keep); });
  return released;
}

void set_segment_observer(segment_observer observer, void* context) {
  core::install_segment_observer(observer, context);
}

compact_result compact(int device) {
  compact_result total;
  for_each_target(device, [&](core::device_cache& cache) {
    const compact_result one = cache.compact();
    total.released_bytes += one.released_bytes;
    total.unmapped_pages += one.unmapped_pages;
  });
  return total;
}

void set_memory_fraction(double fraction, int device) { global().set_memory_fraction(device, fraction); }
void reset_peak_stats(int device) {
  for_each_target(device, [](core::device_cache& cache) { cache.reset_peak_stats(); });
}
void reset_accumulated_stats(int device) {
  for_each_target(device, [](core::device_cache& cache) { cache.reset_accumulated_stats(); });
}
device_stats get_device_stats(int device) { return global().device_stats_of(device, true); }
device_stats get_device_counters(int device) { return global().device_stats_of(device, false); }

memory_snapshot snapshot(int device) { return global().snapshot(device); }
std::string snapshot_json(int device) { return to_json(snapshot(device)); }
std::string snapshot_pickle(int device) { return to_pytorch_pickle(snapshot(device)); }
std::string stats_json(int device) { return to_json(get_device_stats(device), device); }
std::string stats_json(const device_stats& stats, int device) { return to_json(stats, device); }
std::string backend_name(int device) { return global().device(device).backend_name(); }

std::string memory_summary(int device) { return memory_summary(get_device_stats(device), device); }

}  // namespace fragless
