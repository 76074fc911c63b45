// The allocator object: one backend, one live-block map, one device_cache per device
// (created on first use), and the private pools (Note [Private pools]). The public C++ and C APIs are thin wrappers over one global
// instance; tests may build their own instances (with a fake backend, or other settings).
// Invariant: a device's cache, once created, lives as long as the allocator.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/backend.hpp"
#include "core/device_cache.hpp"
#include "core/ipc_sharing.hpp"
#include "core/live_block_map.hpp"
#include "core/private_pools.hpp"
#include "fragless/options.hpp"

namespace fragless::core {

class allocator {
 public:
  static constexpr int kMaxDevices = 64;

  allocator(std::unique_ptr<backend::backend> device_backend, const cache_settings& settings);
  ~allocator();
  allocator(const allocator&) = delete;
  allocator& operator=(const allocator&) = delete;

  // @throws out_of_memory_error, invalid_argument_error, device_error
  void* allocate(std::size_t size_bytes, int device, stream_id stream);
  // @throws invalid_pointer_error (and changes nothing then)
  void deallocate(void* pointer);
  void record_stream(void* pointer, stream_id stream);
  // Note [Retired streams]: `stream` is about to be destroyed. Never throws.
  void retire_stream(stream_id stream) noexcept;

  // Note [Private pools]. @throws as allocate (create_pool: invalid_argument_error, device_error)
  std::uint64_t create_pool(int device);
  void* allocate_from_pool(std::uint64_t pool, std::size_t size_bytes, stream_id stream);
  void release_pool(std::uint64_t pool) noexcept { pools_.release(pool); }
  device_cache& pool_cache(std::uint64_t pool) { return pools_.cache_of(pool); }

  // Note [IPC sharing]. export_block: @throws invalid_pointer_error (not a live block's
  // start), device_error. import_block: @throws invalid_argument_error, device_error.
  std::string export_block(void* pointer);
  void* import_block(const std::string& handle) { return ipc_.import_block(handle); }
  void close_imported_block(void* pointer) noexcept { ipc_.close_import(pointer); }

  // The device's cache, created on first use. @throws invalid_argument_error, device_error
  device_cache& device(int device);
  // The device's cache and its private pools' caches: f(device_cache&) for each.
  template <typename F>
  void for_each_cache(int device_index, F&& f) {
    f(device(device_index));
    if (!pools_.empty()) pools_.for_each(device_index, f);
  }
  // The device's cache and its released pools' caches (live pools left out).
  template <typename F>
  void for_each_cache_but_live_pools(int device_index, F&& f) {
    f(device(device_index));
    if (!pools_.empty()) pools_.for_each_released(device_index, f);
  }
  // Caps every cache of the device, and the pools created later, at fraction x capacity.
  // @throws invalid_argument_error
  void set_memory_fraction(int device, double fraction);
  // The device's stats summed over its caches (Note [Summed stats]), and its snapshot: every
  // cache's segments, by address. @throws as device()
  device_stats device_stats_of(int device, bool with_layout);
  memory_snapshot snapshot(int device);
  // Caches created so far (for device == -1 control calls).
  std::vector<device_cache*> created_devices();
  backend::backend& device_backend() noexcept { return *backend_; }

 private:
  [[noreturn]] void throw_invalid_pointer(void* pointer, const char* operation);
  // Allocates from `cache`; out of memory there, releases the cached memory of the
  // device's other caches and retries once (Note [Private pools]).
  void* allocate_in(device_cache& cache, std::size_t size_bytes, stream_id stream);

  std::unique_ptr<backend::backend> backend_;
  const cache_settings settings_;
  live_block_map live_blocks_;
  std::mutex create_mutex_;
  std::array<std::atomic<device_cache*>, kMaxDevices> devices_{};
  std::vector<std::unique_ptr<device_cache>> owned_;
  int device_count_ = -1;
  private_pools pools_;
  ipc_sharing ipc_;
  std::array<std::atomic<double>, kMaxDevices> memory_fractions_{};  // 0: never set
};

// The process-wide allocator (real CUDA backend, settings from FRAGLESS_CONF). Created on
// first use and deliberately never destroyed: CUDA may already be torn down at exit.
allocator& global_allocator();
// The global instance if something created it already, else nullptr (creates nothing).
allocator* global_allocator_if_created() noexcept;

}  // namespace fragless::core
