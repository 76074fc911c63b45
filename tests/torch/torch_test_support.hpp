// Shared set-up for the c10-level tests: what libtorch_cuda's lazy initialisation installs
// before an allocator is used (a c10-only program must do it itself; see tests/c10).
#pragma once

#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/PeerToPeerAccess.h>
#include <cuda.h>

namespace c10::cuda::_internal {
void setHasPrimaryContext(bool (*function)(c10::DeviceIndex));
}

namespace fragless::torch_test {

inline bool has_primary_context(c10::DeviceIndex device) {
  unsigned int flags = 0;
  int active = 0;
  return cuDevicePrimaryCtxGetState(device, &flags, &active) == CUDA_SUCCESS && active != 0;
}

inline void install_libtorch_cuda_hooks() {
  static const bool done = [] {
    c10::cuda::_internal::setHasPrimaryContext(&has_primary_context);
    c10::cuda::detail::init_p2p_access_cache(c10::cuda::device_count());
    return true;
  }();
  (void)done;
}

}  // namespace fragless::torch_test
