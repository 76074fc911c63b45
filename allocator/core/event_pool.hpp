// A per-device pool of CUDA events, so stream-ordered reuse never creates or destroys
// events on the normal path. Invariant: every event in the pool is idle (no caller holds
// it); events are destroyed only by drain() or the destructor.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "backend/backend.hpp"

namespace fragless::core {

class event_pool {
 public:
  event_pool(backend::backend& device_backend, int device) : backend_(device_backend), device_(device) {}
  ~event_pool() { drain(); }
  event_pool(const event_pool&) = delete;
  event_pool& operator=(const event_pool&) = delete;

  // An idle event, from the pool or newly created. nullptr when creation failed.
  backend::event_handle acquire() noexcept;
  void release(backend::event_handle event) noexcept;
  // Events created so far (the pool keeps this small).
  std::int64_t created_count() const noexcept { return created_.load(std::memory_order_relaxed); }
  // Destroys every pooled event.
  void drain() noexcept;

  // Records an event on `source` and makes `waiter` wait for it (no host blocking).
  backend::status order_after(backend::stream_handle waiter, backend::stream_handle source) noexcept;
  // Records an event on `stream` and asks whether it already completed: ok when all work
  // queued on `stream` so far is done, not_ready when not, error on failure.
  backend::status stream_idle(backend::stream_handle stream) noexcept;

 private:
  backend::backend& backend_;
  int device_;
  std::mutex mutex_;
  std::vector<backend::event_handle> idle_;
  std::atomic<std::int64_t> created_{0};
};

}  // namespace fragless::core
