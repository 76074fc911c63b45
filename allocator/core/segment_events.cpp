// The process-wide segment observer (see segment_events.hpp).
#include "core/segment_events.hpp"

#include <atomic>

namespace fragless::core {
namespace {

std::atomic<segment_observer> current_observer{nullptr};
std::atomic<void*> current_context{nullptr};

}  // namespace

void notify_segment_event(int device, segment_event_kind kind, std::uintptr_t address,
                          std::size_t size_bytes) noexcept {
  const segment_observer observer = current_observer.load(std::memory_order_acquire);
  if (observer == nullptr) return;
  try {
    observer(segment_event{device, kind, address, size_bytes}, current_context.load(std::memory_order_acquire));
  } catch (...) {
    // An observer's failure must not reach the allocator's free and teardown paths.
  }
}

void install_segment_observer(segment_observer observer, void* context) noexcept {
  current_context.store(context, std::memory_order_release);
  current_observer.store(observer, std::memory_order_release);
}

}  // namespace fragless::core
