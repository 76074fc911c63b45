// Driver API: initialisation, devices, primary contexts and peers.
// Invariant: a primary context is "active" from its first retain or make-current on.
#include <cstdio>
#include <cstring>

#include "driver_common.h"
#include "device_attributes.h"

using namespace simcuda;

SIMCUDA_EXPORT CUresult CUDAAPI cuInit(unsigned int flags) {
  SIMCUDA_DRIVER_ENTER();
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  state();
  return CUDA_SUCCESS;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuDriverGetVersion(int* version) {
  SIMCUDA_DRIVER_ENTER();
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = kSimulatedCudaVersion;
  return CUDA_SUCCESS;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuDeviceGetCount(int* count) {
  SIMCUDA_DRIVER_ENTER();
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  *count = static_cast<int>(state().devices.size());
  return CUDA_SUCCESS;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuDeviceGet(CUdevice* device, int ordinal) {
  SIMCUDA_DRIVER_ENTER();
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  if (!valid_device_locked(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuDeviceGetName(char* name, int length, CUdevice device) {
  SIMCUDA_DRIVER_ENTER();
  if (name == nullptr || length <= 0) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  if (!valid_device_locked(device)) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, static_cast<size_t>(length), "%s", kSimulatedDeviceName);
  return CUDA_SUCCESS;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuDeviceTotalMem_v2(size_t* bytes, CUdevice device) {
  SIMCUDA_DRIVER_ENTER();
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  if (!valid_device_locked(device)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = static_cast<size_t>(state().devices[static_cast<size_t>(device)].capacity_bytes);
  return CUDA_SUCCESS;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice device) {
  SIMCUDA_DRIVER_ENTER();
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  if (!valid_device_locked(device)) return CUDA_ERROR_INVALID_DEVICE;
  std::memset(uuid->bytes, 0, sizeof uuid->bytes);
  std::memcpy(uuid->bytes, "simcuda", 7);
  uuid->bytes[15] = static_cast<char>(device);
  return CUDA_SUCCESS;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice device) {
  SIMCUDA_DRIVER_ENTER();
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  if (!valid_device_locked(device)) return CUDA_ERROR_INVALID_DEVICE;
  return device_attribute(attribute, value) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuDeviceCanAccessPeer(int* can_access, CUdevice device, CUdevice peer) {
  SIMCUDA_DRIVER_ENTER();
  if (can_access == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  if (!valid_device_locked(device) || !valid_device_locked(peer)) return CUDA_ERROR_INVALID_DEVICE;
  *can_access = device != peer ? 1 : 0;
  return CUDA_SUCCESS;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext peer_context, unsigned int flags) {
  SIMCUDA_DRIVER_ENTER();
  auto lock = lock_state();
  auto* peer = reinterpret_cast<PrimaryContext*>(peer_context);
  int device = context_device();
  if (peer == nullptr || flags != 0 || !valid_device_locked(peer->device) ||
      &primary_context_locked(peer->device) != peer)
    return CUDA_ERROR_INVALID_VALUE;
  if (peer->device == device) return CUDA_ERROR_INVALID_DEVICE;
  std::vector<bool>& peers = state().devices[static_cast<size_t>(device)].peer_enabled;
  if (peers[static_cast<size_t>(peer->device)]) return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
  peers[static_cast<size_t>(peer->device)] = true;
  return CUDA_SUCCESS;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  SIMCUDA_DRIVER_ENTER();
  if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  if (!valid_device_locked(device)) return CUDA_ERROR_INVALID_DEVICE;
  PrimaryContext& primary = primary_context_locked(device);
  primary.active = true;
  ++primary.retains;
  *context = to_handle(&primary);
  return CUDA_SUCCESS;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  SIMCUDA_DRIVER_ENTER();
  auto lock = lock_state();
  if (!valid_device_locked(device)) return CUDA_ERROR_INVALID_DEVICE;
  PrimaryContext& primary = primary_context_locked(device);
  if (primary.retains <= 0) return CUDA_ERROR_INVALID_CONTEXT;
  --primary.retains;  // the context stays usable: simcuda never tears device state down
  return CUDA_SUCCESS;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice device, unsigned int* flags, int* active) {
  SIMCUDA_DRIVER_ENTER();
  if (flags == nullptr || active == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  if (!valid_device_locked(device)) return CUDA_ERROR_INVALID_DEVICE;
  PrimaryContext& primary = primary_context_locked(device);
  *flags = primary.flags;
  *active = primary.active ? 1 : 0;
  return CUDA_SUCCESS;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxSetFlags_v2(CUdevice device, unsigned int flags) {
  SIMCUDA_DRIVER_ENTER();
  auto lock = lock_state();
  if (!valid_device_locked(device)) return CUDA_ERROR_INVALID_DEVICE;
  primary_context_locked(device).flags = flags;
  return CUDA_SUCCESS;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice device) {
  SIMCUDA_DRIVER_ENTER();
  auto lock = lock_state();
  if (!valid_device_locked(device)) return CUDA_ERROR_INVALID_DEVICE;
  primary_context_locked(device).active = false;
  return CUDA_SUCCESS;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuCtxGetCurrent(CUcontext* context) {
  SIMCUDA_DRIVER_ENTER();
  if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto lock = lock_state();
  *context = has_current_context() ? to_handle(&primary_context_locked(current_device())) : nullptr;
  return CUDA_SUCCESS;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuCtxSetCurrent(CUcontext context) {
  SIMCUDA_DRIVER_ENTER();
  auto lock = lock_state();
  if (context == nullptr) {
    set_current_device(-1);
    return CUDA_SUCCESS;
  }
  auto* primary = reinterpret_cast<PrimaryContext*>(context);
  for (size_t index = 0; index < state().devices.size(); ++index) {
    if (state().devices[index].context.get() == primary) {
      primary->active = true;
      set_current_device(static_cast<int>(index));
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_CONTEXT;
}

namespace {
thread_local std::vector<int> t_context_stack;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext context) {
  SIMCUDA_DRIVER_ENTER();
  int previous = has_current_context() ? current_device() : -1;
  auto* primary = reinterpret_cast<PrimaryContext*>(context);
  auto lock = lock_state();
  if (primary == nullptr || !valid_device_locked(primary->device) || &primary_context_locked(primary->device) != primary)
    return CUDA_ERROR_INVALID_CONTEXT;
  t_context_stack.push_back(previous);
  primary->active = true;
  set_current_device(primary->device);
  return CUDA_SUCCESS;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext* popped) {
  SIMCUDA_DRIVER_ENTER();
  auto lock = lock_state();
  if (!has_current_context()) return CUDA_ERROR_INVALID_CONTEXT;
  if (popped != nullptr) *popped = to_handle(&primary_context_locked(current_device()));
  int previous = -1;
  if (!t_context_stack.empty()) {
    previous = t_context_stack.back();
    t_context_stack.pop_back();
  }
  set_current_device(previous);
  return CUDA_SUCCESS;
}

SIMCUDA_EXPORT CUresult CUDAAPI cuCtxGetDevice(CUdevice* device) {
  SIMCUDA_DRIVER_ENTER();
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!has_current_context()) return CUDA_ERROR_INVALID_CONTEXT;
  *device = current_device();
  return CUDA_SUCCESS;
}
