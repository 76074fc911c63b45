// Device memory from cudaMalloc / cuMemAlloc: carved from the device window
// (Note [Device windows]), page granular, tracked as Regions shared with VMM mappings.
// Invariant: a malloc Region's pages are read-write exactly while the Region exists.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>

#include "device_state.h"

namespace simcuda {

constexpr size_t kMallocAlignmentBytes = 256;

CUresult device_malloc_locked(int device, size_t bytes, bool from_pool, void** out);
// Frees the malloc Region starting exactly at `ptr`; CUDA_ERROR_INVALID_VALUE otherwise.
CUresult device_free_locked(void* ptr);
// The Region containing `address`, or nullptr.
Region* find_region_locked(uintptr_t address);
// Is [begin, begin+bytes) covered by accessible Regions?
bool is_accessible_locked(uintptr_t begin, size_t bytes);
// Does the address lie in simcuda's device address space (windows, VMM reservations)?
bool is_device_address_locked(uintptr_t address);
// Device of a device address, -1 for host addresses.
int device_of_address_locked(uintptr_t address);

}  // namespace simcuda
