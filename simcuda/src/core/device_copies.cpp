// Copies and memsets; see device_copies.h.
//
// Note [Copies take effect at enqueue]
// cudaMemcpy*/cudaMemset* (sync and async) become ops on their stream, so the race oracle
// sees them like kernels (a copy reads its source and writes its destination), but the
// bytes move at enqueue time, not at completion: host code that synchronizes before
// reading sees the same result either way, and it keeps host buffers' lifetimes simple.
// The synchronous variants then complete their stream through the op.
// Host pointers (outside simcuda's device address space) are not tracked.
#include "device_copies.h"

#include <cstring>
#include <vector>

#include "device_memory.h"
#include "pending_work.h"
#include "stream_capture.h"

namespace simcuda {
namespace {

void fill_bytes(uintptr_t destination, uint32_t pattern, size_t pattern_bytes, size_t count) {
  auto* out = reinterpret_cast<unsigned char*>(destination);
  if (pattern_bytes == 1) {
    std::memset(out, static_cast<int>(pattern & 0xff), count);
  } else {
    for (size_t index = 0; index < count; ++index) std::memcpy(out + index * pattern_bytes, &pattern, pattern_bytes);
  }
}

void add_if_device(std::vector<Access>& accesses, uintptr_t begin, size_t bytes, bool writes) {
  if (is_device_address_locked(begin) || find_region_locked(begin) != nullptr)
    accesses.push_back(Access{begin, begin + bytes, writes});
}

bool all_accessible_locked(const std::vector<Access>& accesses) {
  for (const Access& access : accesses)
    if (!is_accessible_locked(access.begin, access.end - access.begin)) return false;
  return true;
}

// What copies and fills share once their accesses are known. On a capturing stream the op
// becomes a node that runs `write` at replay, if its memory is still accessible then
// (Note [Stream capture]); otherwise the op is launched and `write` runs now. Inaccessible
// memory answers CUDA_ERROR_INVALID_VALUE either way (not capturing: after the launch, so
// the race oracle still sees the op).
template <typename Write>
CUresult write_or_capture_locked(Stream& stream, std::vector<Access> accesses, const char* what, size_t bytes,
                                 Write write) {
  const bool accessible = all_accessible_locked(accesses);
  if (stream.capture != nullptr) {
    if (!accessible) return CUDA_ERROR_INVALID_VALUE;
    std::function<void()> none;
    std::vector<Access> checked = accesses;
    capture_op_locked(stream, accesses, none, [checked, write] {
      if (!all_accessible_locked(checked)) return false;
      write();
      return true;
    }, what, bytes);
    return CUDA_SUCCESS;
  }
  launch_locked(stream, std::move(accesses), nullptr, what, bytes);
  if (!accessible) return CUDA_ERROR_INVALID_VALUE;
  write();
  return CUDA_SUCCESS;
}

}  // namespace

CUresult enqueue_copy_locked(Stream& stream, uintptr_t destination, uintptr_t source, size_t bytes,
                             const char* what) {
  if (bytes == 0) return CUDA_SUCCESS;
  if (destination == 0 || source == 0 || destination + bytes < destination || source + bytes < source)
    return CUDA_ERROR_INVALID_VALUE;
  std::vector<Access> accesses;
  add_if_device(accesses, source, bytes, false);
  add_if_device(accesses, destination, bytes, true);
  return write_or_capture_locked(stream, std::move(accesses), what, bytes, [destination, source, bytes] {
    std::memmove(reinterpret_cast<void*>(destination), reinterpret_cast<const void*>(source), bytes);
  });
}

CUresult enqueue_fill_locked(Stream& stream, uintptr_t destination, uint32_t pattern, size_t pattern_bytes,
                             size_t count, const char* what) {
  if (count == 0) return CUDA_SUCCESS;
  size_t bytes = pattern_bytes * count;
  if (destination == 0 || bytes / pattern_bytes != count || destination + bytes < destination ||
      destination % pattern_bytes != 0)
    return CUDA_ERROR_INVALID_VALUE;
  std::vector<Access> accesses;
  add_if_device(accesses, destination, bytes, true);
  return write_or_capture_locked(stream, std::move(accesses), what, bytes, [destination, pattern, pattern_bytes, count] {
    fill_bytes(destination, pattern, pattern_bytes, count);
  });
}

}  // namespace simcuda
