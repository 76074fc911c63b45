// The C ABI (fragless/fragless.h): every function catches everything, maps exceptions to
// fragless_status codes and keeps the message in a thread-local buffer. Never throws.
#include <cstdint>
#include <cstring>
#include <new>
#include <string>

#include "core/allocator.hpp"
#include "fragless/fragless.h"
#include "fragless/fragless.hpp"

namespace {

thread_local std::string last_error_message;

fragless_status fail(fragless_status status, const char* message) noexcept {
  try {
    last_error_message = message;
  } catch (...) {
  }
  return status;
}

// Runs f, translating exceptions into status codes.
template <typename F>
fragless_status guarded(F&& f) noexcept {
  try {
    f();
    return FRAGLESS_OK;
  } catch (const fragless::error& failure) {
    return fail(static_cast<fragless_status>(failure.code()), failure.what());
  } catch (const std::bad_alloc&) {
    return fail(FRAGLESS_ERROR_INTERNAL, "fragless: out of host memory");
  } catch (const std::exception& failure) {
    return fail(FRAGLESS_ERROR_INTERNAL, failure.what());
  } catch (...) {
    return fail(FRAGLESS_ERROR_INTERNAL, "fragless: unknown error");
  }
}

}  // namespace

extern "C" {

const char* fragless_last_error(void) { return last_error_message.c_str(); }

fragless_status fragless_allocate(void** ptr, size_t size, int device, fragless_stream_t stream) {
  if (ptr == nullptr) return fail(FRAGLESS_ERROR_INVALID_ARGUMENT, "fragless_allocate: ptr is NULL");
  *ptr = nullptr;
  return guarded([&] { *ptr = fragless::allocate(size, device, stream); });
}

fragless_status fragless_deallocate(void* ptr) {
  return guarded([&] { fragless::deallocate(ptr); });
}

fragless_status fragless_retire_stream(fragless_stream_t stream) {
  fragless::retire_stream(stream);
  return FRAGLESS_OK;
}

fragless_status fragless_record_stream(void* ptr, fragless_stream_t stream) {
  return guarded([&] { fragless::record_stream(ptr, stream); });
}

void* fragless_malloc(size_t size, int device, fragless_stream_t stream) {
  void* block = nullptr;
  fragless_allocate(&block, size, device, stream);
  return block;
}

void fragless_free(void* ptr, size_t size, int device, fragless_stream_t stream) {
  (void)size;
  (void)device;
  (void)stream;
  fragless_deallocate(ptr);
}

fragless_status fragless_empty_cache(int device, size_t* released_bytes) {
  return guarded([&] {
    const std::size_t released = fragless::empty_cache(device);
    if (released_bytes != nullptr) *released_bytes = released;
  });
}

fragless_status fragless_trim(int device, size_t bytes_to_keep, size_t* released_bytes) {
  return guarded([&] {
    const std::size_t released = fragless::trim(bytes_to_keep, device);
    if (released_bytes != nullptr) *released_bytes = released;
  });
}

fragless_status fragless_compact(int device, size_t* released_bytes, size_t* unmapped_pages) {
  return guarded([&] {
    const fragless::compact_result result = fragless::compact(device);
    if (released_bytes != nullptr) *released_bytes = result.released_bytes;
    if (unmapped_pages != nullptr) *unmapped_pages = result.unmapped_pages;
  });
}

fragless_status fragless_set_memory_fraction(double fraction, int device) {
  return guarded([&] { fragless::set_memory_fraction(fraction, device); });
}

fragless_status fragless_reset_peak_stats(int device) {
  return guarded([&] { fragless::reset_peak_stats(device); });
}

fragless_status fragless_reset_accumulated_stats(int device) {
  return guarded([&] { fragless::reset_accumulated_stats(device); });
}

fragless_status fragless_get_memory_figures(int device, fragless_memory_figures* figures) {
  if (figures == nullptr) return fail(FRAGLESS_ERROR_INVALID_ARGUMENT, "fragless_get_memory_figures: NULL");
  return guarded([&] {
    const fragless::device_stats stats = fragless::get_device_stats(device);
    using fragless::pool_all;
    figures->allocated_bytes = stats.allocated_bytes[pool_all].current;
    figures->allocated_bytes_peak = stats.allocated_bytes[pool_all].peak;
    figures->reserved_bytes = stats.reserved_bytes[pool_all].current;
    figures->reserved_bytes_peak = stats.reserved_bytes[pool_all].peak;
    figures->active_bytes = stats.active_bytes[pool_all].current;
    figures->requested_bytes = stats.requested_bytes[pool_all].current;
    figures->num_alloc_retries = stats.num_alloc_retries;
    figures->num_ooms = stats.num_ooms;
    figures->num_sync_all_streams = stats.num_sync_all_streams;
    figures->num_device_alloc = stats.num_device_alloc;
    figures->num_device_free = stats.num_device_free;
  });
}

fragless_status fragless_base_allocation(void* ptr, void** base, size_t* size) {
  if (base == nullptr || size == nullptr) return fail(FRAGLESS_ERROR_INVALID_ARGUMENT, "fragless_base_allocation: NULL");
  *base = nullptr;
  *size = 0;
  return guarded([&] {
    const auto address = reinterpret_cast<std::uint64_t>(ptr);
    // Rare (IPC): a walk of the snapshot of every device is fine here.
    for (fragless::core::device_cache* cache : fragless::core::global_allocator().created_devices()) {
      for (const fragless::snapshot_segment& segment : cache->snapshot().segments) {
        if (address < segment.address || address >= segment.address + segment.size_bytes) continue;
        for (const fragless::snapshot_block& block : segment.blocks) {
          if (block.state != fragless::block_state::allocated) continue;
          if (address >= block.address && address < block.address + block.size_bytes) {
            *base = reinterpret_cast<void*>(block.address);
            *size = block.size_bytes;
            return;
          }
        }
      }
    }
    throw fragless::invalid_pointer_error("fragless_base_allocation: " + std::to_string(address) +
                                          " is not inside a live fragless block");
  });
}

namespace {
// Copies `text` into buf (NUL-terminated, truncated to buf_bytes); *needed_bytes gets the
// full length + 1.
void copy_text(const std::string& text, char* buf, size_t buf_bytes, size_t* needed_bytes) noexcept {
  if (needed_bytes != nullptr) *needed_bytes = text.size() + 1;
  if (buf != nullptr && buf_bytes > 0) {
    const std::size_t count = std::min(text.size(), buf_bytes - 1);
    std::memcpy(buf, text.data(), count);
    buf[count] = '\0';
  }
}
}  // namespace

fragless_status fragless_memory_summary(int device, char* buf, size_t buf_bytes, size_t* needed_bytes) {
  return guarded([&] { copy_text(fragless::memory_summary(device), buf, buf_bytes, needed_bytes); });
}

fragless_status fragless_memory_stats_json(int device, char* buf, size_t buf_bytes, size_t* needed_bytes) {
  return guarded([&] { copy_text(fragless::stats_json(device), buf, buf_bytes, needed_bytes); });
}

}  // extern "C"
