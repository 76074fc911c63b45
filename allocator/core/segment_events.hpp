// Segment events: the moments device memory is mapped, unmapped, obtained or given back,
// told to one process-wide observer (fragless::set_segment_observer) -- what allocation
// histories such as PyTorch's memory_viz show as segment_map / segment_unmap /
// segment_alloc / segment_free.
// Invariant: notify_segment_event never throws and costs one atomic load when no observer
// is installed; it is called with the device lock held, so the observer must not call
// into fragless.
#pragma once

#include <cstddef>
#include <cstdint>

#include "fragless/fragless.hpp"

namespace fragless::core {

void notify_segment_event(int device, segment_event_kind kind, std::uintptr_t address,
                          std::size_t size_bytes) noexcept;
void install_segment_observer(segment_observer observer, void* context) noexcept;

}  // namespace fragless::core
