// Pooled events (see event_pool.hpp).
#include "core/event_pool.hpp"

namespace fragless::core {

backend::event_handle event_pool::acquire() noexcept {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!idle_.empty()) {
      backend::event_handle event = idle_.back();
      idle_.pop_back();
      return event;
    }
  }
  backend::event_handle event = nullptr;
  if (backend_.create_event(device_, &event) != backend::status::ok) return nullptr;
  created_.fetch_add(1, std::memory_order_relaxed);
  return event;
}

void event_pool::release(backend::event_handle event) noexcept {
  if (event == nullptr) return;
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    idle_.push_back(event);
  } catch (...) {
    backend_.destroy_event(device_, event);
  }
}

void event_pool::drain() noexcept {
  std::vector<backend::event_handle> events;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    events.swap(idle_);
  }
  for (backend::event_handle event : events) backend_.destroy_event(device_, event);
}

backend::status event_pool::order_after(backend::stream_handle waiter, backend::stream_handle source) noexcept {
  backend::event_handle event = acquire();
  if (event == nullptr) return backend::status::error;
  backend::status result = backend_.record_event(device_, event, source);
  // The wait captures the event's state at call time, so the event may be re-recorded
  // (re-pooled) right after it.
  if (result == backend::status::ok) result = backend_.stream_wait_event(device_, waiter, event);
  release(event);
  return result;
}

backend::status event_pool::stream_idle(backend::stream_handle stream) noexcept {
  backend::event_handle event = acquire();
  if (event == nullptr) return backend::status::error;
  backend::status result = backend_.record_event(device_, event, stream);
  if (result == backend::status::ok) result = backend_.query_event(device_, event);
  release(event);
  return result;
}

}  // namespace fragless::core
