// Driver API: cuGetProcAddress, and the lookup the runtime's cudaGetDriverEntryPoint uses.
//
// Note [Proc address versions]
// A request names the unversioned API ("cuMemAlloc") and a CUDA version. Like the real
// driver we hand out the newest variant ("cuMemAlloc_v2") whose version the caller's version
// reaches; the minimum versions below follow the CUDA release that introduced each variant
// (default 3020 for _v2, 12030 for _v3, 12050 for _v4). A name already carrying a suffix
// resolves as is. A variant that is only a not-supported stub (driver_stubs.cpp) loses to
// an older implemented one (cuCtxGetDevice over the stub cuCtxGetDevice_v2). Lookups use dlsym on this library's own handle, so they find simcuda's
// functions (including the not-supported stubs of driver_stubs.cpp) and never an
// interposer's. Per-thread-default-stream variants are not distinguished.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "driver_common.h"

namespace {

void* own_handle() {
  static void* handle = [] {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&own_handle), &info) == 0 || info.dli_fname == nullptr) return static_cast<void*>(nullptr);
    return dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  }();
  return handle;
}

void* own_symbol(const std::string& name) {
  void* handle = own_handle();
  return handle == nullptr ? nullptr : dlsym(handle, name.c_str());
}

int minimum_version(const std::string& versioned) {
  struct Minimum {
    const char* name;
    int version;
  };
  static constexpr Minimum kMinimums[] = {
      {"cuStreamDestroy_v2", 4000},         {"cuEventDestroy_v2", 4000},
      {"cuCtxDestroy_v2", 4000},            {"cuCtxPopCurrent_v2", 4000},
      {"cuCtxPushCurrent_v2", 4000},        {"cuDevicePrimaryCtxRelease_v2", 11000},
      {"cuDevicePrimaryCtxReset_v2", 11000}, {"cuDevicePrimaryCtxSetFlags_v2", 11000},
      {"cuIpcOpenMemHandle_v2", 11000},     {"cuDeviceGetUuid_v2", 11040},
      {"cuStreamGetCaptureInfo_v2", 11030}, {"cuStreamWriteValue32_v2", 11070},
      {"cuStreamWaitValue32_v2", 11070},    {"cuStreamWriteValue64_v2", 11070},
      {"cuStreamWaitValue64_v2", 11070},    {"cuStreamBatchMemOp_v2", 11070},
      {"cuGetProcAddress_v2", 12000},       {"cuMemAdvise_v2", 12020},
      {"cuMemPrefetchAsync_v2", 12020},     {"cuEventElapsedTime_v2", 12080},
      {"cuCtxCreate_v3", 11040},            {"cuGraphInstantiateWithFlags", 11040},
  };
  for (const Minimum& minimum : kMinimums)
    if (versioned == minimum.name) return minimum.version;
  if (versioned.ends_with("_v2")) return versioned.starts_with("cuGraph") ? 12030 : 3020;
  if (versioned.ends_with("_v3")) return 12030;
  if (versioned.ends_with("_v4")) return 12050;
  return 0;
}

}  // namespace

namespace simcuda {
bool is_driver_stub(const void* function);
}

extern "C" void* simcuda_core_driver_proc(const char* symbol, unsigned cuda_version) {
  if (symbol == nullptr || std::strncmp(symbol, "cu", 2) != 0) return nullptr;
  std::string name(symbol);
  void* newest_stub = nullptr;
  for (const char* suffix : {"_v4", "_v3", "_v2", ""}) {
    std::string versioned = name + suffix;
    if (static_cast<int>(cuda_version) < minimum_version(versioned)) continue;
    void* found = own_symbol(versioned);
    if (found == nullptr) continue;
    if (!simcuda::is_driver_stub(found)) return found;
    if (newest_stub == nullptr) newest_stub = found;
  }
  return newest_stub;
}

namespace {

CUresult proc_address(const char* symbol, void** function, int cuda_version, CUdriverProcAddressQueryResult* status) {
  if (symbol == nullptr || function == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *function = simcuda_core_driver_proc(symbol, static_cast<unsigned>(cuda_version < 0 ? 0 : cuda_version));
  if (status != nullptr) *status = *function != nullptr ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return *function != nullptr ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

}  // namespace

SIMCUDA_EXPORT CUresult CUDAAPI cuGetProcAddress_v2(const char* symbol, void** function, int cuda_version,
                                                    cuuint64_t, CUdriverProcAddressQueryResult* status) {
  SIMCUDA_DRIVER_ENTER();
  return proc_address(symbol, function, cuda_version, status);
}

SIMCUDA_EXPORT CUresult CUDAAPI cuGetProcAddress(const char* symbol, void** function, int cuda_version, cuuint64_t) {
  SIMCUDA_DRIVER_ENTER();
  return proc_address(symbol, function, cuda_version, nullptr);
}

// Note [Kernel launch entry points] (runtime_launch.cpp): only a statically linked CUDA
// runtime asks for the driver's private export tables. simcuda cannot provide them; it
// says so once, in one line the user can act on, and answers not supported.
SIMCUDA_EXPORT CUresult CUDAAPI cuGetExportTable(const void** table, const CUuuid*) {
  SIMCUDA_DRIVER_ENTER();
  static std::once_flag once;
  std::call_once(once, [] {
    std::fputs("simcuda: this program links the CUDA runtime statically (nvcc's default), which simcuda cannot "
               "stand in for; rebuild it with `nvcc -cudart shared` to run it on simcuda\n",
               stderr);
  });
  if (table != nullptr) *table = nullptr;
  return CUDA_ERROR_NOT_SUPPORTED;
}
