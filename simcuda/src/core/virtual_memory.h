// The CUDA virtual memory management API on host memory (Note [VMM on memfd]).
// Invariant: a physical handle's bytes count against its device's capacity from cuMemCreate
// until it is both released and unmapped everywhere.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>

namespace simcuda {

CUresult reserve_address_locked(uintptr_t* out, size_t bytes, size_t alignment, uintptr_t hint);
CUresult free_address_locked(uintptr_t begin, size_t bytes);
CUresult create_handle_locked(uint64_t* out, size_t bytes, const CUmemAllocationProp& properties);
CUresult release_handle_locked(uint64_t handle);
CUresult map_locked(uintptr_t begin, size_t bytes, size_t offset, uint64_t handle);
CUresult unmap_locked(uintptr_t begin, size_t bytes);
CUresult set_access_locked(uintptr_t begin, size_t bytes, bool read_write);
CUresult retain_handle_locked(uint64_t* out, uintptr_t address);
CUresult handle_properties_locked(CUmemAllocationProp* out, uint64_t handle);
CUresult export_handle_fd_locked(int* out, uint64_t handle);
CUresult import_handle_fd_locked(uint64_t* out, int fd);

}  // namespace simcuda
