// The device's total and free memory for fragless-stats' list, from NVML (what nvidia-smi
// shows), loaded with dlopen so fragless-stats runs where there is no NVML. Invariant: this
// is the CLI's only way to the device; it never initialises CUDA (which would take device
// memory in the caller) and every failure answers "unknown" (nullopt), never an error.
#pragma once

#include <cstdint>
#include <optional>

namespace fragless::cli {

struct device_memory {
  std::uint64_t total_bytes = 0;
  std::uint64_t free_bytes = 0;
};

class device_memory_info {
 public:
  device_memory_info();
  ~device_memory_info();
  device_memory_info(const device_memory_info&) = delete;
  device_memory_info& operator=(const device_memory_info&) = delete;

  // The memory of CUDA device `device` as NVML numbers it (CUDA_VISIBLE_DEVICES not applied).
  std::optional<device_memory> query(int device) const;

 private:
  void* library_ = nullptr;
  bool initialised_ = false;
  int (*get_handle_)(unsigned int, void**) = nullptr;
  int (*get_memory_)(void*, void*) = nullptr;
  int (*shutdown_)() = nullptr;
};

}  // namespace fragless::cli
