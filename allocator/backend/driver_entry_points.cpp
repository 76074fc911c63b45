// driver_entry_points: see the header. One resolver for every driver call we use.
#include "backend/driver_entry_points.hpp"

#include <cuda_runtime_api.h>

namespace fragless::backend {
namespace {

template <typename F>
bool resolve(const char* symbol, F* function) noexcept {
  void* pointer = nullptr;
  cudaDriverEntryPointQueryResult query = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(symbol, &pointer, 12000, cudaEnableDefault, &query) != cudaSuccess ||
      query != cudaDriverEntryPointSuccess || pointer == nullptr) {
    cudaGetLastError();
    return false;
  }
  *function = reinterpret_cast<F>(pointer);
  return true;
}

}  // namespace

driver_entry_points load_driver_entry_points() noexcept {
  driver_entry_points t;
  t.complete = resolve("cuMemCreate", &t.mem_create) && resolve("cuMemRelease", &t.mem_release) &&
               resolve("cuMemAddressReserve", &t.address_reserve) && resolve("cuMemAddressFree", &t.address_free) &&
               resolve("cuMemMap", &t.mem_map) && resolve("cuMemUnmap", &t.mem_unmap) &&
               resolve("cuMemSetAccess", &t.set_access) &&
               resolve("cuMemGetAllocationGranularity", &t.granularity) &&
               resolve("cuDeviceGetAttribute", &t.device_attribute);
  resolve("cuMemExportToShareableHandle", &t.export_handle);
  resolve("cuMemImportFromShareableHandle", &t.import_handle);
  return t;
}

CUmemAllocationProp device_allocation_prop(int device) noexcept {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

CUmemAccessDesc device_read_write_access(int device) noexcept {
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return access;
}

}  // namespace fragless::backend
