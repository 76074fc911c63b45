// A tiny test-and-test-and-set lock for the hot path's short critical sections (a few
// dozen instructions: a free-list pop, a hash-table probe). Uncontended it costs one
// atomic exchange and one store, about a third of a pthread mutex; contended it spins
// briefly, then yields the CPU so an oversubscribed machine still makes progress.
// Invariant: never held across a call that can block for long (at most a non-blocking
// event query, or the event pool or stats mutex, both leaf locks).
#pragma once

#include <atomic>
#include <thread>

namespace fragless::core {

class spin_lock {
 public:
  void lock() noexcept {
    for (;;) {
      if (!locked_.exchange(true, std::memory_order_acquire)) return;
      for (int spins = 0; locked_.load(std::memory_order_relaxed); ++spins) {
        if (spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
          __builtin_ia32_pause();
#endif
        } else {
          std::this_thread::yield();
        }
      }
    }
  }
  bool try_lock() noexcept { return !locked_.load(std::memory_order_relaxed) && !locked_.exchange(true, std::memory_order_acquire); }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

}  // namespace fragless::core
