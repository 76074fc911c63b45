// NVML through dlopen; see device_memory_info.hpp.
#include "device_memory_info.hpp"

#include <dlfcn.h>

namespace fragless::cli {
namespace {

// nvmlMemory_t, version 1 (NVML's public ABI; no nvml.h needed).
struct nvml_memory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

template <typename F>
F lookup(void* library, const char* name) {
  return reinterpret_cast<F>(::dlsym(library, name));
}

}  // namespace

device_memory_info::device_memory_info() {
  library_ = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library_ == nullptr) return;
  auto init = lookup<int (*)()>(library_, "nvmlInit_v2");
  get_handle_ = lookup<int (*)(unsigned int, void**)>(library_, "nvmlDeviceGetHandleByIndex_v2");
  get_memory_ = lookup<int (*)(void*, void*)>(library_, "nvmlDeviceGetMemoryInfo");
  shutdown_ = lookup<int (*)()>(library_, "nvmlShutdown");
  initialised_ = init != nullptr && get_handle_ != nullptr && get_memory_ != nullptr && init() == 0;
}

// NVML stays loaded: it (and the driver library it loads) may keep process-lifetime state
// that unloading would strand, which LeakSanitizer then reports as leaks. The process is a
// short-lived CLI; loading it once is enough.
device_memory_info::~device_memory_info() {
  if (initialised_ && shutdown_ != nullptr) shutdown_();
}

std::optional<device_memory> device_memory_info::query(int device) const {
  if (!initialised_ || device < 0) return std::nullopt;
  void* handle = nullptr;
  if (get_handle_(static_cast<unsigned int>(device), &handle) != 0) return std::nullopt;
  nvml_memory memory{};
  if (get_memory_(handle, &memory) != 0 || memory.free > memory.total) return std::nullopt;
  return device_memory{memory.total, memory.free};
}

}  // namespace fragless::cli
