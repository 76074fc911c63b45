// See stream_registry.hpp.
#include "preload/stream_registry.hpp"

#include <algorithm>
#include <new>

namespace fragless::preload {

void stream_registry::add(void* stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  streams_.push_back(stream);
}

void stream_registry::remove(void* stream) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  streams_.erase(std::remove(streams_.begin(), streams_.end(), stream), streams_.end());
}

std::vector<void*> stream_registry::non_blocking_streams() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return streams_;
}

void stream_registry::reset_after_fork() noexcept {
  // The mutex may have been held by a thread that does not exist in the child: build a
  // new one in place rather than unlocking a lock we do not own.
  new (&mutex_) std::mutex();
}

stream_registry& non_blocking_streams() {
  static stream_registry* const registry = new stream_registry();  // never destroyed: used at exit
  return *registry;
}

namespace {
// Note [Fork] in interposer.cpp: made when the library is loaded. Made on first use, a
// child forked while another thread of the parent was making it waited forever on the
// static's guard in its fork handler (which resets the registry).
__attribute__((constructor)) void make_registry_at_load() { (void)non_blocking_streams(); }
}  // namespace

}  // namespace fragless::preload
