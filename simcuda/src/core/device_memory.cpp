// cudaMalloc'd device memory; see device_memory.h.
#include "device_memory.h"

#include <sys/mman.h>

#include <algorithm>

#include "race_oracle.h"

namespace simcuda {
namespace {

size_t round_up(size_t value, size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// Gives [begin, begin+bytes) back to the window's free spans, coalescing with neighbours.
void return_span_locked(Device& device, uintptr_t begin, size_t bytes) {
  auto next = device.free_spans.lower_bound(begin);
  if (next != device.free_spans.begin()) {
    auto previous = std::prev(next);
    if (previous->first + previous->second == begin) {
      begin = previous->first;
      bytes += previous->second;
      device.free_spans.erase(previous);
    }
  }
  if (next != device.free_spans.end() && begin + bytes == next->first) {
    bytes += next->second;
    device.free_spans.erase(next);
  }
  device.free_spans.emplace(begin, bytes);
}

}  // namespace

CUresult device_malloc_locked(int device_index, size_t bytes, bool from_pool, void** out) {
  State& self = state();
  Device& device = self.devices[static_cast<size_t>(device_index)];
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (bytes > device.window_bytes) return CUDA_ERROR_OUT_OF_MEMORY;  // also catches overflow below
  size_t rounded = round_up(bytes, kPageBytes);
  if (device.used_bytes + rounded > device.capacity_bytes) return CUDA_ERROR_OUT_OF_MEMORY;
  auto span = device.free_spans.begin();
  while (span != device.free_spans.end() && span->second < rounded) ++span;  // first fit
  if (span == device.free_spans.end()) return CUDA_ERROR_OUT_OF_MEMORY;
  uintptr_t begin = span->first;
  size_t span_bytes = span->second;
  if (mprotect(reinterpret_cast<void*>(begin), rounded, PROT_READ | PROT_WRITE) != 0)
    return CUDA_ERROR_OUT_OF_MEMORY;
  device.free_spans.erase(span);
  if (span_bytes > rounded) device.free_spans.emplace(begin + rounded, span_bytes - rounded);
  Region region;
  region.begin = begin;
  region.bytes = bytes;
  region.mapped_bytes = rounded;
  region.kind = RegionKind::malloc;
  region.device = device_index;
  region.accessible = true;
  region.from_pool = from_pool;
  self.regions.emplace(begin, region);
  device.used_bytes += rounded;
  if (from_pool) {  // Note [Simple memory pools]: reserved == used
    MemoryPool& pool = *device.default_pool;
    pool.used_bytes += rounded;
    pool.used_high = std::max(pool.used_high, pool.used_bytes);
    pool.reserved_bytes = pool.used_bytes;
    pool.reserved_high = std::max(pool.reserved_high, pool.reserved_bytes);
  }
  *out = reinterpret_cast<void*>(begin);
  return CUDA_SUCCESS;
}

CUresult device_free_locked(void* ptr) {
  State& self = state();
  auto found = self.regions.find(reinterpret_cast<uintptr_t>(ptr));
  if (found == self.regions.end() || found->second.kind != RegionKind::malloc) return CUDA_ERROR_INVALID_VALUE;
  Region region = found->second;
  report_release_races_locked(region.begin, region.begin + region.bytes, "free");
  self.regions.erase(found);
  // Replace the pages (drops their contents) and make the range fault again.
  mmap(reinterpret_cast<void*>(region.begin), region.mapped_bytes, PROT_NONE,
       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  Device& device = self.devices[static_cast<size_t>(region.device)];
  device.used_bytes -= region.mapped_bytes;
  if (region.from_pool) {
    MemoryPool& pool = *device.default_pool;
    pool.used_bytes -= std::min<uint64_t>(pool.used_bytes, region.mapped_bytes);
    pool.reserved_bytes = pool.used_bytes;
  }
  return_span_locked(device, region.begin, region.mapped_bytes);
  return CUDA_SUCCESS;
}

Region* find_region_locked(uintptr_t address) {
  auto& regions = state().regions;
  auto after = regions.upper_bound(address);
  if (after == regions.begin()) return nullptr;
  Region& candidate = std::prev(after)->second;
  return address < candidate.begin + candidate.bytes ? &candidate : nullptr;
}

bool is_accessible_locked(uintptr_t begin, size_t bytes) {
  if (bytes == 0) bytes = 1;
  uintptr_t end = begin + bytes;
  if (end < begin) return false;
  uintptr_t at = begin;
  while (at < end) {
    Region* region = find_region_locked(at);
    if (region == nullptr || !region->accessible) return false;
    at = region->begin + region->bytes;
  }
  return true;
}

bool is_device_address_locked(uintptr_t address) { return device_of_address_locked(address) >= 0; }

int device_of_address_locked(uintptr_t address) {
  State& self = state();
  for (size_t index = 0; index < self.devices.size(); ++index) {
    const Device& device = self.devices[index];
    if (address >= device.window_begin && address < device.window_begin + device.window_bytes)
      return static_cast<int>(index);
  }
  if (Region* region = find_region_locked(address)) return region->device;
  auto after = self.reservations.upper_bound(address);
  if (after != self.reservations.begin()) {
    const Reservation& reservation = std::prev(after)->second;
    if (address < reservation.begin + reservation.bytes) return 0;
  }
  return -1;
}

}  // namespace simcuda
