// The process-wide allocator behind the public APIs: the CUDA backend plus settings from
// the environment, created on first use and never destroyed (see allocator.hpp).
#include "core/allocator.hpp"

namespace fragless::core {

allocator& global_allocator() {
  static allocator* const instance = [] {
    std::unique_ptr<backend::backend> cuda = backend::make_cuda_backend();
    if (!cuda) throw device_error("fragless: the CUDA runtime could not be initialised");
    return new allocator(std::move(cuda), settings_from_environment());
  }();
  return *instance;
}

}  // namespace fragless::core
