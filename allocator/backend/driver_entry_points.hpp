// driver_entry_points: the CUDA driver's virtual memory management calls, resolved with
// cudaGetDriverEntryPointByVersion so that nothing of ours links libcuda directly, and the
// allocation properties every caller passes them. Part of the CUDA boundary: the
// allocator's CUDA backend and the benchmark's device-call calibration both use it.
// Invariant: `complete` is true only when every required entry point resolved; the
// optional ones (Note [IPC sharing] in core/ipc_sharing.hpp) may stay null in a complete table.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

namespace fragless::backend {

struct driver_entry_points {
  PFN_cuMemCreate_v10020 mem_create = nullptr;
  PFN_cuMemRelease_v10020 mem_release = nullptr;
  PFN_cuMemAddressReserve_v10020 address_reserve = nullptr;
  PFN_cuMemAddressFree_v10020 address_free = nullptr;
  PFN_cuMemMap_v10020 mem_map = nullptr;
  PFN_cuMemUnmap_v10020 mem_unmap = nullptr;
  PFN_cuMemSetAccess_v10020 set_access = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 granularity = nullptr;
  PFN_cuDeviceGetAttribute_v2000 device_attribute = nullptr;
  bool complete = false;  // every entry point above resolved
  // Optional: sharing fails with a clear error without them.
  PFN_cuMemExportToShareableHandle_v10020 export_handle = nullptr;
  PFN_cuMemImportFromShareableHandle_v10020 import_handle = nullptr;
};

// Resolves every entry point (CUDA 12.0 ABI); a missing one stays null and clears the
// runtime's last error. Never throws.
driver_entry_points load_driver_entry_points() noexcept;

// Pinned memory on `device`: what the allocator creates and the calibration measures.
CUmemAllocationProp device_allocation_prop(int device) noexcept;
// Read-write access from `device`, for cuMemSetAccess.
CUmemAccessDesc device_read_write_access(int device) noexcept;

}  // namespace fragless::backend
