// The CUDA virtual memory management API; see virtual_memory.h.
//
// Note [VMM on memfd]
// cuMemAddressReserve maps a PROT_NONE, MAP_NORESERVE range. cuMemCreate makes a memfd of
// the handle's size (counted against device capacity). cuMemMap maps the memfd
// MAP_SHARED|MAP_FIXED over the reserved range, still PROT_NONE, so mapping one handle at
// two addresses aliases the same bytes. cuMemSetAccess makes the mapping read-write;
// cuMemUnmap puts a fresh PROT_NONE anonymous mapping back. Sizes and addresses must be
// multiples of the 2 MiB granularity, as on real devices. Like the real driver, a mapping
// must lie inside one reservation, may not overlap another mapping (CUDA_ERROR_ALREADY_MAPPED)
// and cuMemUnmap must cover whole mappings.
//
// Note [Physical arena]
// A memfd per handle costs one file descriptor per 2 MiB page, and processes commonly may
// open 20,000 files at most: 40 GiB of 2 MiB pages would exhaust them. So every handle
// starts as a slice of one sparse, process-wide memfd (the arena); only when a handle
// created shareable (requestedHandleTypes with POSIX file descriptors) is first exported
// does it move to a memfd of its own: its bytes are copied there and each of its mappings
// is remapped in place, so only exported handles cost a descriptor. Releasing a slice
// punches a hole so the memory is really given back, and the slice's offsets are reused.
// As on real devices, exporting a handle that was not created shareable fails.
#include "virtual_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <vector>

#include "device_memory.h"
#include "device_state.h"
#include "race_oracle.h"

namespace simcuda {
namespace {

bool granular(uint64_t value) { return value % kVmmGranularityBytes == 0; }

// Note [Physical arena]. Guarded by the state lock like everything here.
struct Arena {
  int fd = -1;
  std::map<size_t, size_t> free_ranges;  // offset -> bytes, coalesced
};
constexpr size_t kArenaBytes = size_t{1} << 44;  // 16 TiB of sparse file offsets

Arena& arena_locked() {
  static Arena arena;
  if (arena.fd < 0) {
    arena.fd = memfd_create("simcuda-physical-arena", MFD_CLOEXEC);
    if (arena.fd >= 0 && ftruncate(arena.fd, static_cast<off_t>(kArenaBytes)) != 0) {
      close(arena.fd);
      arena.fd = -1;
    }
    if (arena.fd >= 0) arena.free_ranges.emplace(0, kArenaBytes);
  }
  return arena;
}

// First fit; returns false when the arena cannot provide `bytes`.
bool arena_take_locked(size_t bytes, int* fd, size_t* offset) {
  Arena& arena = arena_locked();
  if (arena.fd < 0) return false;
  for (auto at = arena.free_ranges.begin(); at != arena.free_ranges.end(); ++at) {
    if (at->second < bytes) continue;
    *offset = at->first;
    *fd = arena.fd;
    const size_t rest = at->second - bytes;
    const size_t rest_offset = at->first + bytes;
    arena.free_ranges.erase(at);
    if (rest > 0) arena.free_ranges.emplace(rest_offset, rest);
    return true;
  }
  return false;
}

void arena_give_back_locked(size_t offset, size_t bytes) {
  Arena& arena = arena_locked();
  fallocate(arena.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
            static_cast<off_t>(bytes));
  auto next = arena.free_ranges.lower_bound(offset);
  if (next != arena.free_ranges.end() && offset + bytes == next->first) {
    bytes += next->second;
    next = arena.free_ranges.erase(next);
  }
  if (next != arena.free_ranges.begin()) {
    auto previous = std::prev(next);
    if (previous->first + previous->second == offset) {
      previous->second += bytes;
      return;
    }
  }
  arena.free_ranges.emplace(offset, bytes);
}

const Reservation* reservation_containing_locked(uintptr_t begin, size_t bytes) {
  auto& reservations = state().reservations;
  auto after = reservations.upper_bound(begin);
  if (after == reservations.begin()) return nullptr;
  const Reservation& candidate = std::prev(after)->second;
  return begin + bytes <= candidate.begin + candidate.bytes ? &candidate : nullptr;
}

bool any_region_overlaps_locked(uintptr_t begin, uintptr_t end) {
  auto& regions = state().regions;
  auto at = regions.lower_bound(begin);
  if (at != regions.begin()) {
    auto previous = std::prev(at);
    if (previous->second.begin + previous->second.mapped_bytes > begin) return true;
  }
  return at != regions.end() && at->first < end;
}

void drop_handle_if_unused_locked(uint64_t handle) {
  State& self = state();
  auto found = self.handles.find(handle);
  if (found == self.handles.end()) return;
  PhysicalHandle& physical = found->second;
  if (physical.references > 0 || physical.mappings > 0) return;
  if (physical.owns_fd) close(physical.fd);
  else arena_give_back_locked(physical.fd_offset, physical.bytes);
  if (physical.counted) self.devices[static_cast<size_t>(physical.device)].used_bytes -= physical.bytes;
  self.handles.erase(found);
}

}  // namespace

CUresult reserve_address_locked(uintptr_t* out, size_t bytes, size_t alignment, uintptr_t hint) {
  if (bytes == 0 || !granular(bytes)) return CUDA_ERROR_INVALID_VALUE;
  if (alignment == 0) alignment = kVmmGranularityBytes;
  if ((alignment & (alignment - 1)) != 0) return CUDA_ERROR_INVALID_VALUE;
  if (bytes > (size_t{1} << 46)) return CUDA_ERROR_OUT_OF_MEMORY;
  constexpr int kFlags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  void* base = MAP_FAILED;
  if (hint != 0 && hint % alignment == 0) {
    base = mmap(reinterpret_cast<void*>(hint), bytes, PROT_NONE, kFlags | MAP_FIXED_NOREPLACE, -1, 0);
  }
  uintptr_t begin = 0;
  if (base != MAP_FAILED) {
    begin = reinterpret_cast<uintptr_t>(base);
  } else {
    // Over-reserve, then trim both ends to the alignment.
    size_t padded = bytes + alignment;
    base = mmap(nullptr, padded, PROT_NONE, kFlags, -1, 0);
    if (base == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    uintptr_t raw = reinterpret_cast<uintptr_t>(base);
    begin = (raw + alignment - 1) / alignment * alignment;
    if (begin > raw) munmap(base, begin - raw);
    uintptr_t tail = begin + bytes;
    if (raw + padded > tail) munmap(reinterpret_cast<void*>(tail), raw + padded - tail);
  }
  state().reservations[begin] = Reservation{begin, bytes, bytes};
  *out = begin;
  return CUDA_SUCCESS;
}

CUresult free_address_locked(uintptr_t begin, size_t bytes) {
  State& self = state();
  auto found = self.reservations.find(begin);
  if (found == self.reservations.end() || found->second.bytes != bytes) return CUDA_ERROR_INVALID_VALUE;
  if (any_region_overlaps_locked(begin, begin + bytes)) return CUDA_ERROR_INVALID_VALUE;  // still mapped
  munmap(reinterpret_cast<void*>(begin), bytes);
  self.reservations.erase(found);
  return CUDA_SUCCESS;
}

CUresult create_handle_locked(uint64_t* out, size_t bytes, const CUmemAllocationProp& properties) {
  State& self = state();
  if (bytes == 0 || !granular(bytes)) return CUDA_ERROR_INVALID_VALUE;
  if (properties.type != CU_MEM_ALLOCATION_TYPE_PINNED || properties.location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
      !valid_device_locked(properties.location.id))
    return CUDA_ERROR_INVALID_VALUE;
  Device& device = self.devices[static_cast<size_t>(properties.location.id)];
  if (bytes > device.capacity_bytes || device.used_bytes + bytes > device.capacity_bytes)
    return CUDA_ERROR_OUT_OF_MEMORY;
  PhysicalHandle physical;
  if (!arena_take_locked(bytes, &physical.fd, &physical.fd_offset)) return CUDA_ERROR_OUT_OF_MEMORY;
  physical.owns_fd = false;
  uint64_t id = self.next_handle_id++;
  physical.bytes = bytes;
  physical.device = properties.location.id;
  physical.properties = properties;
  self.handles.emplace(id, physical);
  device.used_bytes += bytes;
  *out = id;
  return CUDA_SUCCESS;
}

CUresult release_handle_locked(uint64_t handle) {
  auto& handles = state().handles;
  auto found = handles.find(handle);
  if (found == handles.end() || found->second.references <= 0) return CUDA_ERROR_INVALID_VALUE;
  --found->second.references;
  drop_handle_if_unused_locked(handle);
  return CUDA_SUCCESS;
}

CUresult map_locked(uintptr_t begin, size_t bytes, size_t offset, uint64_t handle) {
  State& self = state();
  auto found = self.handles.find(handle);
  if (found == self.handles.end() || found->second.references <= 0) return CUDA_ERROR_INVALID_HANDLE;
  PhysicalHandle& physical = found->second;
  if (bytes == 0 || !granular(begin) || !granular(bytes) || !granular(offset) || offset + bytes > physical.bytes ||
      offset + bytes < offset)
    return CUDA_ERROR_INVALID_VALUE;
  if (reservation_containing_locked(begin, bytes) == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (any_region_overlaps_locked(begin, begin + bytes)) return CUDA_ERROR_ALREADY_MAPPED;
  void* mapped = mmap(reinterpret_cast<void*>(begin), bytes, PROT_NONE, MAP_SHARED | MAP_FIXED, physical.fd,
                      static_cast<off_t>(physical.fd_offset + offset));
  if (mapped == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  Region region;
  region.begin = begin;
  region.bytes = bytes;
  region.mapped_bytes = bytes;
  region.kind = RegionKind::vmm_mapping;
  region.device = physical.device;
  region.accessible = false;
  region.handle = handle;
  region.handle_offset = offset;
  self.regions.emplace(begin, region);
  ++physical.mappings;
  return CUDA_SUCCESS;
}

CUresult unmap_locked(uintptr_t begin, size_t bytes) {
  State& self = state();
  uintptr_t end = begin + bytes;
  if (bytes == 0 || end < begin) return CUDA_ERROR_INVALID_VALUE;
  // The range must be exactly a run of whole mappings.
  uintptr_t at = begin;
  while (at < end) {
    auto found = self.regions.find(at);
    if (found == self.regions.end() || found->second.kind != RegionKind::vmm_mapping) return CUDA_ERROR_INVALID_VALUE;
    at += found->second.mapped_bytes;
  }
  if (at != end) return CUDA_ERROR_INVALID_VALUE;
  report_release_races_locked(begin, end, "cuMemUnmap");
  at = begin;
  while (at < end) {
    auto found = self.regions.find(at);
    Region region = found->second;
    self.regions.erase(found);
    mmap(reinterpret_cast<void*>(region.begin), region.mapped_bytes, PROT_NONE,
         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    auto handle = self.handles.find(region.handle);
    if (handle != self.handles.end()) {
      --handle->second.mappings;
      drop_handle_if_unused_locked(region.handle);
    }
    at += region.mapped_bytes;
  }
  return CUDA_SUCCESS;
}

CUresult set_access_locked(uintptr_t begin, size_t bytes, bool read_write) {
  uintptr_t end = begin + bytes;
  if (bytes == 0 || end < begin) return CUDA_ERROR_INVALID_VALUE;
  uintptr_t at = begin;
  while (at < end) {  // every byte must be mapped
    Region* region = find_region_locked(at);
    if (region == nullptr || region->kind != RegionKind::vmm_mapping) return CUDA_ERROR_INVALID_VALUE;
    at = region->begin + region->mapped_bytes;
  }
  at = begin;
  while (at < end) {
    Region* region = find_region_locked(at);
    uintptr_t stop = std::min<uintptr_t>(end, region->begin + region->mapped_bytes);
    uintptr_t page_begin = at / kPageBytes * kPageBytes;
    mprotect(reinterpret_cast<void*>(page_begin), stop - page_begin, read_write ? PROT_READ | PROT_WRITE : PROT_NONE);
    region->accessible = read_write;
    at = stop;
  }
  return CUDA_SUCCESS;
}

CUresult retain_handle_locked(uint64_t* out, uintptr_t address) {
  Region* region = find_region_locked(address);
  if (region == nullptr || region->kind != RegionKind::vmm_mapping) return CUDA_ERROR_INVALID_VALUE;
  auto found = state().handles.find(region->handle);
  if (found == state().handles.end()) return CUDA_ERROR_INVALID_VALUE;
  ++found->second.references;
  *out = region->handle;
  return CUDA_SUCCESS;
}

CUresult handle_properties_locked(CUmemAllocationProp* out, uint64_t handle) {
  auto found = state().handles.find(handle);
  if (found == state().handles.end()) return CUDA_ERROR_INVALID_VALUE;
  *out = found->second.properties;
  return CUDA_SUCCESS;
}

namespace {

// Note [Physical arena]: moves a handle's bytes from its arena slice to a memfd of its own
// and remaps every mapping of it there, in place.
bool give_own_file_locked(uint64_t id, PhysicalHandle& physical) {
  int own = memfd_create("simcuda-physical", MFD_CLOEXEC);
  if (own < 0) return false;
  bool copied = ftruncate(own, static_cast<off_t>(physical.bytes)) == 0;
  std::vector<char> buffer(size_t{1} << 20);
  for (size_t done = 0; copied && done < physical.bytes;) {
    const size_t chunk = std::min(buffer.size(), physical.bytes - done);
    copied = pread(physical.fd, buffer.data(), chunk, static_cast<off_t>(physical.fd_offset + done)) ==
                 static_cast<ssize_t>(chunk) &&
             pwrite(own, buffer.data(), chunk, static_cast<off_t>(done)) == static_cast<ssize_t>(chunk);
    done += chunk;
  }
  if (!copied) {
    close(own);
    return false;
  }
  for (auto& [begin, region] : state().regions) {
    if (region.kind != RegionKind::vmm_mapping || region.handle != id) continue;
    const int protection = region.accessible ? PROT_READ | PROT_WRITE : PROT_NONE;
    mmap(reinterpret_cast<void*>(region.begin), region.mapped_bytes, protection, MAP_SHARED | MAP_FIXED, own,
         static_cast<off_t>(region.handle_offset));
  }
  arena_give_back_locked(physical.fd_offset, physical.bytes);
  physical.fd = own;
  physical.fd_offset = 0;
  physical.owns_fd = true;
  return true;
}

}  // namespace

CUresult export_handle_fd_locked(int* out, uint64_t handle) {
  auto found = state().handles.find(handle);
  if (found == state().handles.end()) return CUDA_ERROR_INVALID_VALUE;
  // Only handles created shareable can be exported (Note [Physical arena]).
  if ((found->second.properties.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (!found->second.owns_fd && !give_own_file_locked(handle, found->second)) return CUDA_ERROR_OUT_OF_MEMORY;
  int fd = dup(found->second.fd);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  *out = fd;
  return CUDA_SUCCESS;
}

CUresult import_handle_fd_locked(uint64_t* out, int fd) {
  State& self = state();
  struct stat info {};
  if (fstat(fd, &info) != 0 || info.st_size <= 0 || !granular(static_cast<uint64_t>(info.st_size)))
    return CUDA_ERROR_INVALID_VALUE;
  // The same bytes under a second handle; counted once (as the exporter's), so no capacity.
  int own = dup(fd);
  if (own < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  uint64_t id = self.next_handle_id++;
  PhysicalHandle physical;
  physical.fd = own;
  physical.bytes = static_cast<size_t>(info.st_size);
  physical.properties.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  physical.properties.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  physical.counted = false;
  self.handles.emplace(id, physical);
  *out = id;
  return CUDA_SUCCESS;
}

}  // namespace simcuda
