// The simulated device's identity and attribute values (an H100-like profile, compute 9.0).
// Invariant: the runtime's cudaDeviceProp and cuDeviceGetAttribute read the same table.
#pragma once

#include <cuda.h>

namespace simcuda {

constexpr int kSimulatedCudaVersion = 13000;
constexpr const char* kSimulatedDeviceName = "simcuda";

// False for attributes outside the enum; unlisted valid attributes read 0.
bool device_attribute(CUdevice_attribute attribute, int* value);

}  // namespace simcuda
