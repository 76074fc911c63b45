// fragless::torch::install() and its C ABI: puts the adapter into both c10 registries.
// Invariant: installed at most once; refused while the current allocator holds memory.
#include <c10/core/Allocator.h>
#include <c10/core/DeviceType.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>

#include "fragless/fragless.hpp"
#include "fragless/torch.hpp"
#include "torch_allocator.hpp"

namespace fragless::torch {
namespace {

std::mutex install_mutex;
bool installed = false;  // guarded by install_mutex

// Copies `text` into a C buffer, truncated and NUL-terminated.
void copy_out(const std::string& text, char* buffer, unsigned long buffer_bytes) noexcept {
  if (buffer == nullptr || buffer_bytes == 0) return;
  const std::size_t length = std::min<std::size_t>(text.size(), buffer_bytes - 1);
  std::memcpy(buffer, text.data(), length);
  buffer[length] = '\0';
}

}  // namespace

void install() {
  std::lock_guard lock(install_mutex);
  if (installed) throw install_error("fragless is already installed as the CUDA allocator");
  c10_allocator::CUDAAllocator* current = c10_allocator::allocator.load();
  if (current != nullptr && current->initialized()) {
    throw install_error("cannot install fragless: the current CUDA allocator (" + current->name() +
                        ") is already initialised and may hold memory fragless could not free; call "
                        "fragless.install() / fragless::torch::install() before the first CUDA allocation");
  }
  torch_allocator& adapter = torch_allocator::instance();
  c10_allocator::allocator.store(&adapter);
  // torch.accelerator and at::empty read c10's per-device-type registry; registering with
  // the highest priority keeps a later registration of the native allocator from winning.
  c10::SetAllocator(c10::DeviceType::CUDA, &adapter, UINT8_MAX);
  installed = true;
}

bool is_installed() noexcept {
  std::lock_guard lock(install_mutex);
  return installed;
}

}  // namespace fragless::torch

extern "C" {

int fragless_torch_install(char* message, unsigned long message_bytes) {
  try {
    if (fragless::torch::is_installed()) {
      fragless::torch::copy_out("fragless is already installed as the CUDA allocator", message, message_bytes);
      return 1;
    }
    fragless::torch::install();
    fragless::torch::copy_out("", message, message_bytes);
    return 0;
  } catch (const fragless::torch::install_error& failure) {
    fragless::torch::copy_out(failure.what(), message, message_bytes);
    return fragless::torch::is_installed() ? 1 : 2;
  } catch (const std::exception& failure) {
    fragless::torch::copy_out(failure.what(), message, message_bytes);
    return 3;
  } catch (...) {
    fragless::torch::copy_out("unknown failure", message, message_bytes);
    return 3;
  }
}

int fragless_torch_is_installed(void) { return fragless::torch::is_installed() ? 1 : 0; }

int fragless_torch_stats_json(int device, char* buffer, unsigned long buffer_bytes, unsigned long* needed_bytes) {
  try {
    // Installed, the keys torch.cuda.memory_stats() shares read the same (Note [Pool checkpoints]).
    const std::string json = fragless::torch::is_installed()
                                 ? fragless::stats_json(fragless::torch::torch_allocator::instance().visible_stats(device), device)
                                 : fragless::stats_json(device);
    if (needed_bytes != nullptr) *needed_bytes = json.size() + 1;
    fragless::torch::copy_out(json, buffer, buffer_bytes);
    return 0;
  } catch (const std::exception& failure) {
    fragless::torch::copy_out(failure.what(), buffer, buffer_bytes);
    return 3;
  }
}

}  // extern "C"
