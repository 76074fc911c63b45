// fragless inside LibTorch: installs fragless as c10's CUDA allocator, so every tool built on
// c10's allocator interface (torch.cuda.memory_stats, memory_summary, memory snapshots and
// history, the profiler's memory view, OutOfMemoryError) keeps working on top of fragless.
// Invariant: install() succeeds at most once per process, and only before c10's native
// allocator handed out memory; after it, both c10 registries point at the same fragless adapter.
#pragma once

#include <stdexcept>
#include <string>

#if defined(FRAGLESS_TORCH_BUILDING)
#define FRAGLESS_TORCH_API __attribute__((visibility("default")))
#else
#define FRAGLESS_TORCH_API
#endif

namespace fragless::torch {

// Why install() refused: the message says what to do instead.
class FRAGLESS_TORCH_API install_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Makes fragless the CUDA allocator of c10: sets c10::cuda::CUDACachingAllocator::allocator and
// c10::SetAllocator(kCUDA). Call it before the first CUDA allocation.
// @throws install_error when already installed, or when the current allocator is initialised
// (memory it handed out could not be freed by fragless).
FRAGLESS_TORCH_API void install();
// True once install() succeeded in this process.
FRAGLESS_TORCH_API bool is_installed() noexcept;

}  // namespace fragless::torch

extern "C" {
// C ABI for ctypes (the Python module). Returns 0 on success, 1 if already installed, 2 if the
// current allocator is initialised, 3 on any other failure; the message (NUL-terminated,
// truncated to message_bytes) says why.
FRAGLESS_TORCH_API int fragless_torch_install(char* message, unsigned long message_bytes);
FRAGLESS_TORCH_API int fragless_torch_is_installed(void);
// fragless's own stats of `device` as JSON (Note [Stats JSON] in fragless/stats.hpp), with the
// same truncation rules; *needed_bytes (may be NULL) receives the full length + 1. Returns 0,
// or 3 on failure (message in the buffer).
FRAGLESS_TORCH_API int fragless_torch_stats_json(int device, char* buffer, unsigned long buffer_bytes,
                                                 unsigned long* needed_bytes);
}
