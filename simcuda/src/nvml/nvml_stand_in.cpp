// A minimal libnvidia-ml.so.1. The real NVML ships with every CUDA driver, and libc10_cuda
// calls it unconditionally on the expandable-segments path (to ask whether the GPU fabric
// is available), dereferencing its functions without a null check. simcuda's answer: NVML
// works, devices exist, there is no fabric, no NVLink and no running process.
// Invariant: no function writes into an NVML struct whose layout it does not own (no nvml.h
// is available here): the fabric query leaves the caller's "not supported" state untouched.
#include <cstdint>
#include <cstdio>

#include "../core/core_abi.h"
#include "../core/entry_scope.h"

#define SIMCUDA_NVML extern "C" __attribute__((visibility("default")))

namespace {

constexpr int kNvmlSuccess = 0;
constexpr int kNvmlInvalidArgument = 2;
constexpr int kNvmlNotSupported = 3;

// Device handles are the ordinal plus one, so no handle is null.
void* device_handle(int ordinal) { return reinterpret_cast<void*>(static_cast<uintptr_t>(ordinal) + 1); }

int device_count() {
  int count = 0;
  auto get_count = reinterpret_cast<int (*)(int*)>(simcuda_core_driver_proc("cuDeviceGetCount", 13000));
  if (get_count == nullptr || get_count(&count) != 0) return 0;
  return count;
}

}  // namespace

SIMCUDA_NVML int nvmlInit_v2() {
  SIMCUDA_ENTER(int);
  return kNvmlSuccess;
}

SIMCUDA_NVML int nvmlShutdown() {
  SIMCUDA_ENTER(int);
  return kNvmlSuccess;
}

SIMCUDA_NVML int nvmlDeviceGetCount_v2(unsigned int* count) {
  SIMCUDA_ENTER(int);
  if (count == nullptr) return kNvmlInvalidArgument;
  *count = static_cast<unsigned>(device_count());
  return kNvmlSuccess;
}

SIMCUDA_NVML int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  SIMCUDA_ENTER(int);
  if (device == nullptr || static_cast<int>(index) >= device_count()) return kNvmlInvalidArgument;
  *device = device_handle(static_cast<int>(index));
  return kNvmlSuccess;
}

// simcuda's devices have PCI bus ids "0000:<ordinal>:00.0" (cudaDeviceGetPCIBusId).
SIMCUDA_NVML int nvmlDeviceGetHandleByPciBusId_v2(const char* bus_id, void** device) {
  SIMCUDA_ENTER(int);
  unsigned domain = 0, bus = 0, slot = 0, function = 0;
  if (bus_id == nullptr || device == nullptr ||
      std::sscanf(bus_id, "%x:%x:%x.%x", &domain, &bus, &slot, &function) != 4 ||
      static_cast<int>(bus) >= device_count())
    return kNvmlInvalidArgument;
  *device = device_handle(static_cast<int>(bus));
  return kNvmlSuccess;
}

SIMCUDA_NVML int nvmlDeviceGetGpuFabricInfoV(void* device, void* info) {
  SIMCUDA_ENTER(int);
  return device == nullptr || info == nullptr ? kNvmlInvalidArgument : kNvmlSuccess;
}

SIMCUDA_NVML int nvmlDeviceGetComputeRunningProcesses(void* device, unsigned int* count, void*) {
  SIMCUDA_ENTER(int);
  if (device == nullptr || count == nullptr) return kNvmlInvalidArgument;
  *count = 0;
  return kNvmlSuccess;
}

// nvmlMemory_t (version 1): three unsigned long longs, total, free, used, in bytes -- a
// layout NVML has kept since its first release. Device memory in simcuda belongs to the
// process that allocates it, so another process (fragless-stats) sees every device free.
struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

SIMCUDA_NVML int nvmlDeviceGetMemoryInfo(void* device, NvmlMemory* memory) {
  SIMCUDA_ENTER(int);
  const auto ordinal = static_cast<int>(reinterpret_cast<uintptr_t>(device)) - 1;
  if (device == nullptr || memory == nullptr || ordinal < 0 || ordinal >= device_count()) return kNvmlInvalidArgument;
  auto total_memory = reinterpret_cast<int (*)(size_t*, int)>(simcuda_core_driver_proc("cuDeviceTotalMem", 13000));
  size_t total = 0;
  if (total_memory == nullptr || total_memory(&total, ordinal) != 0) return kNvmlNotSupported;
  *memory = NvmlMemory{total, total, 0};
  return kNvmlSuccess;
}

SIMCUDA_NVML int nvmlDeviceGetNvLinkRemoteDeviceType(void*, unsigned int, void*) {
  SIMCUDA_ENTER(int);
  return kNvmlNotSupported;
}

SIMCUDA_NVML int nvmlDeviceGetNvLinkRemotePciInfo_v2(void*, unsigned int, void*) {
  SIMCUDA_ENTER(int);
  return kNvmlNotSupported;
}

SIMCUDA_NVML int nvmlSystemGetCudaDriverVersion_v2(int* version) {
  SIMCUDA_ENTER(int);
  if (version == nullptr) return kNvmlInvalidArgument;
  *version = 13000;
  return kNvmlSuccess;
}

SIMCUDA_NVML const char* nvmlErrorString(int result) {
  switch (result) {
    case kNvmlSuccess: return "Success";
    case kNvmlInvalidArgument: return "Invalid Argument";
    case kNvmlNotSupported: return "Not Supported";
    default: return "Unknown Error";
  }
}
