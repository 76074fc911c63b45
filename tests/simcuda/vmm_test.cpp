// The virtual memory management API on simcuda: reserve/create/map/set-access/unmap really
// map memory, one handle mapped twice aliases, capacity counts physical handles, bad input
// gets error codes; and the driver entry points resolve through cuGetProcAddress and
// cudaGetDriverEntryPoint*.
#include <cstdint>
#include <cstring>

#include <unistd.h>

#include "simcuda_test_support.h"

using simcuda_test::require_simcuda;

namespace {

constexpr size_t kGranule = size_t{2} << 20;

CUmemAllocationProp device_properties(int device) {
  CUmemAllocationProp properties{};
  properties.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  properties.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  properties.location.id = device;
  return properties;
}

CUmemAccessDesc read_write(int device) {
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return access;
}

}  // namespace

TEST_CASE("VMM: granularity, aliasing through two mappings, unmap makes the range inaccessible") {
  require_simcuda();
  REQUIRE(cuInit(0) == CUDA_SUCCESS);
  CUmemAllocationProp properties = device_properties(0);
  size_t granularity = 0;
  REQUIRE(cuMemGetAllocationGranularity(&granularity, &properties, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS);
  CHECK(granularity == kGranule);

  CUdeviceptr base = 0;
  REQUIRE(cuMemAddressReserve(&base, 4 * kGranule, 0, 0, 0) == CUDA_SUCCESS);
  CHECK(base % kGranule == 0);
  CHECK(simcuda_is_accessible(reinterpret_cast<void*>(base), 1) == 0);

  const uint64_t used_before = simcuda_used_bytes(0);
  CUmemGenericAllocationHandle handle = 0;
  REQUIRE(cuMemCreate(&handle, kGranule, &properties, 0) == CUDA_SUCCESS);
  CHECK(simcuda_used_bytes(0) == used_before + kGranule);

  CUdeviceptr first = base, second = base + 2 * kGranule;
  REQUIRE(cuMemMap(first, kGranule, 0, handle, 0) == CUDA_SUCCESS);
  REQUIRE(cuMemMap(second, kGranule, 0, handle, 0) == CUDA_SUCCESS);
  CHECK(simcuda_is_accessible(reinterpret_cast<void*>(first), kGranule) == 0);  // mapped, no access yet
  CUmemAccessDesc access = read_write(0);
  REQUIRE(cuMemSetAccess(first, kGranule, &access, 1) == CUDA_SUCCESS);
  REQUIRE(cuMemSetAccess(second, kGranule, &access, 1) == CUDA_SUCCESS);
  CHECK(simcuda_is_accessible(reinterpret_cast<void*>(first), kGranule) == 1);
  CHECK(simcuda_used_bytes(0) == used_before + kGranule);  // one physical handle, two mappings

  // Write through one mapping, read through the other.
  auto* first_bytes = reinterpret_cast<unsigned char*>(first);
  auto* second_bytes = reinterpret_cast<unsigned char*>(second);
  std::memset(first_bytes, 0x3C, 4096);
  first_bytes[kGranule - 1] = 0x7E;
  CHECK(second_bytes[0] == 0x3C);
  CHECK(second_bytes[4095] == 0x3C);
  CHECK(second_bytes[kGranule - 1] == 0x7E);
  REQUIRE(cudaMemset(reinterpret_cast<void*>(second), 0x11, 16) == cudaSuccess);
  CHECK(first_bytes[15] == 0x11);

  // The handle behind an address, and its properties.
  CUmemGenericAllocationHandle retained = 0;
  REQUIRE(cuMemRetainAllocationHandle(&retained, reinterpret_cast<void*>(second + 100)) == CUDA_SUCCESS);
  CHECK(retained == handle);
  CUmemAllocationProp read_back{};
  REQUIRE(cuMemGetAllocationPropertiesFromHandle(&read_back, retained) == CUDA_SUCCESS);
  CHECK(read_back.location.id == 0);
  CHECK(read_back.type == CU_MEM_ALLOCATION_TYPE_PINNED);
  REQUIRE(cuMemRelease(retained) == CUDA_SUCCESS);
  CUdeviceptr range_base = 0;
  size_t range_bytes = 0;
  REQUIRE(cuMemGetAddressRange_v2(&range_base, &range_bytes, second + 5) == CUDA_SUCCESS);
  CHECK(range_base == second);
  CHECK(range_bytes == kGranule);

  // Unmapping one alias leaves the other intact.
  REQUIRE(cuMemUnmap(second, kGranule) == CUDA_SUCCESS);
  CHECK(simcuda_is_accessible(reinterpret_cast<void*>(second), 1) == 0);
  CHECK(simcuda_is_accessible(reinterpret_cast<void*>(first), kGranule) == 1);
  CHECK(first_bytes[0] == 0x11);

  // Released while still mapped: the memory lives until the last unmap.
  REQUIRE(cuMemRelease(handle) == CUDA_SUCCESS);
  CHECK(simcuda_used_bytes(0) == used_before + kGranule);
  CHECK(first_bytes[kGranule - 1] == 0x7E);
  CHECK(cuMemAddressFree(base, 4 * kGranule) != CUDA_SUCCESS);  // still mapped
  REQUIRE(cuMemUnmap(first, kGranule) == CUDA_SUCCESS);
  CHECK(simcuda_used_bytes(0) == used_before);
  CHECK(simcuda_is_accessible(reinterpret_cast<void*>(first), 1) == 0);
  REQUIRE(cuMemAddressFree(base, 4 * kGranule) == CUDA_SUCCESS);
}

TEST_CASE("VMM: a handle exported as a file descriptor and imported maps the same bytes") {
  require_simcuda();
  CUmemAllocationProp properties = device_properties(0);
  properties.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  CUmemGenericAllocationHandle handle = 0, imported = 0;
  REQUIRE(cuMemCreate(&handle, kGranule, &properties, 0) == CUDA_SUCCESS);
  int fd = -1;
  REQUIRE(cuMemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) == CUDA_SUCCESS);
  REQUIRE(fd >= 0);
  const uint64_t used = simcuda_used_bytes(0);
  REQUIRE(cuMemImportFromShareableHandle(&imported, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                                         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == CUDA_SUCCESS);
  CHECK(simcuda_used_bytes(0) == used);  // the same memory, counted once
  CUdeviceptr a = 0, b = 0;
  REQUIRE(cuMemAddressReserve(&a, kGranule, 0, 0, 0) == CUDA_SUCCESS);
  REQUIRE(cuMemAddressReserve(&b, kGranule, 0, 0, 0) == CUDA_SUCCESS);
  REQUIRE(cuMemMap(a, kGranule, 0, handle, 0) == CUDA_SUCCESS);
  REQUIRE(cuMemMap(b, kGranule, 0, imported, 0) == CUDA_SUCCESS);
  CUmemAccessDesc access = read_write(0);
  REQUIRE(cuMemSetAccess(a, kGranule, &access, 1) == CUDA_SUCCESS);
  REQUIRE(cuMemSetAccess(b, kGranule, &access, 1) == CUDA_SUCCESS);
  reinterpret_cast<unsigned char*>(a)[12345] = 0x5D;
  CHECK(reinterpret_cast<unsigned char*>(b)[12345] == 0x5D);
  REQUIRE(cuMemUnmap(a, kGranule) == CUDA_SUCCESS);
  REQUIRE(cuMemUnmap(b, kGranule) == CUDA_SUCCESS);
  REQUIRE(cuMemRelease(handle) == CUDA_SUCCESS);
  REQUIRE(cuMemRelease(imported) == CUDA_SUCCESS);
  REQUIRE(cuMemAddressFree(a, kGranule) == CUDA_SUCCESS);
  REQUIRE(cuMemAddressFree(b, kGranule) == CUDA_SUCCESS);
  close(fd);
}

TEST_CASE("VMM: bad input gets error codes") {
  require_simcuda();
  CUmemAllocationProp properties = device_properties(0);
  CUdeviceptr base = 0;
  CHECK(cuMemAddressReserve(&base, 1000, 0, 0, 0) == CUDA_ERROR_INVALID_VALUE);  // not granular
  CHECK(cuMemAddressReserve(&base, 0, 0, 0, 0) == CUDA_ERROR_INVALID_VALUE);
  REQUIRE(cuMemAddressReserve(&base, 2 * kGranule, 0, 0, 0) == CUDA_SUCCESS);

  CUmemGenericAllocationHandle handle = 0;
  CHECK(cuMemCreate(&handle, 4096, &properties, 0) == CUDA_ERROR_INVALID_VALUE);
  CHECK(cuMemCreate(&handle, (size_t{1} << 50), &properties, 0) == CUDA_ERROR_OUT_OF_MEMORY);
  CUmemAllocationProp bad_device = device_properties(7);
  CHECK(cuMemCreate(&handle, kGranule, &bad_device, 0) == CUDA_ERROR_INVALID_VALUE);
  REQUIRE(cuMemCreate(&handle, kGranule, &properties, 0) == CUDA_SUCCESS);

  CHECK(cuMemMap(base + 4096, kGranule, 0, handle, 0) == CUDA_ERROR_INVALID_VALUE);  // unaligned
  CHECK(cuMemMap(base, 2 * kGranule, 0, handle, 0) == CUDA_ERROR_INVALID_VALUE);     // larger than the handle
  CHECK(cuMemMap(base + 4 * kGranule, kGranule, 0, handle, 0) == CUDA_ERROR_INVALID_VALUE);  // outside
  CHECK(cuMemMap(base, kGranule, 0, 987654, 0) == CUDA_ERROR_INVALID_HANDLE);
  REQUIRE(cuMemMap(base, kGranule, 0, handle, 0) == CUDA_SUCCESS);
  CHECK(cuMemMap(base, kGranule, 0, handle, 0) == CUDA_ERROR_ALREADY_MAPPED);  // over a mapped range
  CUmemAccessDesc access = read_write(0);
  CHECK(cuMemSetAccess(base + kGranule, kGranule, &access, 1) == CUDA_ERROR_INVALID_VALUE);  // unmapped part
  CHECK(cuMemUnmap(base + kGranule, kGranule) == CUDA_ERROR_INVALID_VALUE);
  CHECK(cuMemUnmap(base, kGranule / 2) == CUDA_ERROR_INVALID_VALUE);  // part of a mapping
  REQUIRE(cuMemUnmap(base, kGranule) == CUDA_SUCCESS);
  CHECK(cuMemUnmap(base, kGranule) == CUDA_ERROR_INVALID_VALUE);  // twice
  REQUIRE(cuMemRelease(handle) == CUDA_SUCCESS);
  CHECK(cuMemRelease(handle) == CUDA_ERROR_INVALID_VALUE);  // double release
  CHECK(cuMemAddressFree(base, kGranule) == CUDA_ERROR_INVALID_VALUE);  // wrong size
  REQUIRE(cuMemAddressFree(base, 2 * kGranule) == CUDA_SUCCESS);
  CHECK(cuMemAddressFree(base, 2 * kGranule) == CUDA_ERROR_INVALID_VALUE);
}

TEST_CASE("VMM: physical handles count against capacity") {
  require_simcuda();
  const uint64_t original = simcuda_capacity(0);
  REQUIRE(simcuda_set_capacity(0, simcuda_used_bytes(0) + 3 * kGranule) == 0);
  CUmemAllocationProp properties = device_properties(0);
  CUmemGenericAllocationHandle a = 0, b = 0;
  REQUIRE(cuMemCreate(&a, 2 * kGranule, &properties, 0) == CUDA_SUCCESS);
  CHECK(cuMemCreate(&b, 2 * kGranule, &properties, 0) == CUDA_ERROR_OUT_OF_MEMORY);
  void* pointer = nullptr;
  CHECK(cudaMalloc(&pointer, 2 * kGranule) == cudaErrorMemoryAllocation);  // shared capacity
  cudaGetLastError();
  REQUIRE(cuMemRelease(a) == CUDA_SUCCESS);
  REQUIRE(cuMemCreate(&b, 2 * kGranule, &properties, 0) == CUDA_SUCCESS);
  REQUIRE(cuMemRelease(b) == CUDA_SUCCESS);
  REQUIRE(simcuda_set_capacity(0, original) == 0);
}

TEST_CASE("VMM: unmapping memory a pending kernel touches is a race") {
  require_simcuda();
  simcuda_race_reset();
  CUmemAllocationProp properties = device_properties(0);
  CUdeviceptr base = 0;
  CUmemGenericAllocationHandle handle = 0;
  REQUIRE(cuMemAddressReserve(&base, kGranule, 0, 0, 0) == CUDA_SUCCESS);
  REQUIRE(cuMemCreate(&handle, kGranule, &properties, 0) == CUDA_SUCCESS);
  REQUIRE(cuMemMap(base, kGranule, 0, handle, 0) == CUDA_SUCCESS);
  CUmemAccessDesc access = read_write(0);
  REQUIRE(cuMemSetAccess(base, kGranule, &access, 1) == CUDA_SUCCESS);
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  REQUIRE(simcuda_launch(stream, reinterpret_cast<void*>(base + 64), 128, 1) != 0);
  REQUIRE(cuMemUnmap(base, kGranule) == CUDA_SUCCESS);
  CHECK(simcuda_race_count() == 1);
  CHECK(simcuda_test::race_report().find("cuMemUnmap") != std::string::npos);
  // A kernel on the unmapped range is a race too.
  REQUIRE(simcuda_launch(stream, reinterpret_cast<void*>(base), 16, 0) != 0);
  CHECK(simcuda_race_count() == 2);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
  REQUIRE(cuMemRelease(handle) == CUDA_SUCCESS);
  REQUIRE(cuMemAddressFree(base, kGranule) == CUDA_SUCCESS);
  simcuda_race_reset();
}

TEST_CASE("driver entry points resolve by name and version") {
  require_simcuda();
  void* function = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
  REQUIRE(cudaGetDriverEntryPointByVersion("cuMemMap", &function, 12000, cudaEnableDefault, &status) == cudaSuccess);
  CHECK(status == cudaDriverEntryPointSuccess);
  CHECK(function == reinterpret_cast<void*>(&cuMemMap));
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // still exported, still used by callers
  REQUIRE(cudaGetDriverEntryPoint("cuMemCreate", &function, cudaEnableDefault, &status) == cudaSuccess);
#pragma GCC diagnostic pop
  CHECK(function == reinterpret_cast<void*>(&cuMemCreate));
  REQUIRE(cudaGetDriverEntryPointByVersion("cuNoSuchFunction", &function, 12000, cudaEnableDefault, &status) ==
          cudaSuccess);
  CHECK(status == cudaDriverEntryPointSymbolNotFound);
  CHECK(function == nullptr);

  // Versioned names: the newest implemented variant the version allows.
  CUdriverProcAddressQueryResult driver_status{};
  REQUIRE(cuGetProcAddress_v2("cuMemAlloc", &function, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &driver_status) ==
          CUDA_SUCCESS);
  CHECK(function == reinterpret_cast<void*>(&cuMemAlloc_v2));
  REQUIRE(cuGetProcAddress_v2("cuMemAlloc", &function, 3000, CU_GET_PROC_ADDRESS_DEFAULT, &driver_status) ==
          CUDA_SUCCESS);
  CHECK(function != reinterpret_cast<void*>(&cuMemAlloc_v2));  // the pre-3.2 entry point
  REQUIRE(cuGetProcAddress_v2("cuMemGetInfo", &function, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &driver_status) ==
          CUDA_SUCCESS);
  CHECK(function == reinterpret_cast<void*>(&cuMemGetInfo_v2));
  REQUIRE(cuGetProcAddress_v2("cuMemFree_v2", &function, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &driver_status) ==
          CUDA_SUCCESS);
  CHECK(function == reinterpret_cast<void*>(&cuMemFree_v2));
  CHECK(cuGetProcAddress_v2("cuNoSuchFunction", &function, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &driver_status) ==
        CUDA_ERROR_NOT_FOUND);
  CHECK(driver_status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);

  // A resolved function works; an implemented older variant beats a newer unsupported one.
  REQUIRE(cuGetProcAddress_v2("cuCtxGetCurrent", &function, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &driver_status) ==
          CUDA_SUCCESS);
  CUcontext context = nullptr;
  CHECK(reinterpret_cast<decltype(&cuCtxGetCurrent)>(function)(&context) == CUDA_SUCCESS);
  REQUIRE(cuGetProcAddress_v2("cuCtxGetDevice", &function, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &driver_status) ==
          CUDA_SUCCESS);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  CUdevice device = -1;
  CHECK(reinterpret_cast<CUresult (*)(CUdevice*)>(function)(&device) == CUDA_SUCCESS);
  CHECK(device == 0);
  // Not implemented: found, answers not-supported.
  REQUIRE(cuGetProcAddress_v2("cuGreenCtxCreate", &function, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &driver_status) ==
          CUDA_SUCCESS);
  CHECK(reinterpret_cast<CUresult (*)(CUgreenCtx*, CUdevResourceDesc, CUdevice, unsigned int)>(function)(
            nullptr, nullptr, 0, 0) == CUDA_ERROR_NOT_SUPPORTED);

  const char* text = nullptr;
  REQUIRE(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &text) == CUDA_SUCCESS);
  CHECK(std::string(text) == "CUDA_ERROR_OUT_OF_MEMORY");
  REQUIRE(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &text) == CUDA_SUCCESS);
  CHECK(std::string(text) == "out of memory");
  const int unknown_code = 1000;  // inside the enum's range, not a named code
  CHECK(cuGetErrorString(static_cast<CUresult>(unknown_code), &text) == CUDA_ERROR_INVALID_VALUE);
  CHECK(std::string(cudaGetErrorName(cudaErrorMemoryAllocation)) == "cudaErrorMemoryAllocation");
  CHECK(std::string(cudaGetErrorString(cudaErrorMemoryAllocation)) == "out of memory");
}
