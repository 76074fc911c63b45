// A per-device pool of CUDA events, so stream-ordered reuse never creates or destroys
// events on the normal path. Invariant: every event in the pool is idle (no caller holds
// it); events are destroyed only by drain() or the destructor.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backend/backend.hpp"

namespace fragless::core {

class event_pool {
 public:
  event_pool(backend::backend& device_backend, int device) : backend_(device_backend), device_(device) {}
  ~event_pool();
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
  // Both accept a retired stream's stand-in (Note [Retired streams]): its event is waited
  // for / queried instead (error when it could not be recorded).
  backend::status stream_idle(backend::stream_handle stream) noexcept;

  // Note [Retired streams]: records an event on `stream`, which is about to be destroyed,
  // and returns the stand-in that replaces it in the allocator's state (nullptr when no
  // host memory; then nothing was recorded).
  backend::stream_handle retire(backend::stream_handle stream) noexcept;
  bool is_retired(backend::stream_handle stream) noexcept;
  // For a retired stand-in: false once its work is known to be done (nothing to wait for).
  bool retired_work_pending(backend::stream_handle stand_in) noexcept;

 private:
  backend::backend& backend_;
  int device_;
  std::mutex mutex_;
  std::vector<backend::event_handle> idle_;
  // Note [Retired streams]: stand-in -> the event recorded on the stream as it was
  // destroyed (nullptr once it completed, or if it could not be recorded: `recorded` says).
  struct retired_stream {
    backend::event_handle event = nullptr;
    bool recorded = false;
  };
  std::unordered_map<backend::stream_handle, std::unique_ptr<retired_stream>> retired_;
  // Under mutex_: the retired record of `stream`, or nullptr.
  retired_stream* find_retired_locked(backend::stream_handle stream) noexcept;
  // Under mutex_: a retired stand-in's state: ok (done; its event went back to the pool),
  // not_ready, or error (nothing was recorded).
  backend::status retired_state_locked(retired_stream& record) noexcept;
  std::atomic<std::int64_t> created_{0};
};

}  // namespace fragless::core
