// The non-blocking streams the program created through the runtime, for the plain-cudaFree
// rule (Note [Plain cudaFree] in interposer.cpp). Invariant: a stream is listed from its
// successful creation with cudaStreamNonBlocking until its cudaStreamDestroy.
#pragma once

#include <mutex>
#include <vector>

namespace fragless::preload {

class stream_registry {
 public:
  void add(void* stream);
  void remove(void* stream) noexcept;
  std::vector<void*> non_blocking_streams() const;
  // After fork(): the child has one thread; start from a fresh, unlocked registry.
  void reset_after_fork() noexcept;

 private:
  mutable std::mutex mutex_;
  std::vector<void*> streams_;
};

stream_registry& non_blocking_streams();

}  // namespace fragless::preload
