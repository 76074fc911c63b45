// Copies and memsets as stream ops (Note [Copies take effect at enqueue]).
// Invariant: bytes are only moved when every device range involved is accessible.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>

#include "device_state.h"

namespace simcuda {

CUresult enqueue_copy_locked(Stream& stream, uintptr_t destination, uintptr_t source, size_t bytes,
                             const char* what);
// Fills with a repeating pattern of 1, 2 or 4 bytes, `count` elements.
CUresult enqueue_fill_locked(Stream& stream, uintptr_t destination, uint32_t pattern, size_t pattern_bytes,
                             size_t count, const char* what);

}  // namespace simcuda
