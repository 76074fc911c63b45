// The backend the allocator uses while CUDA graphs may be captured: a decorator over the
// real backend that holds back, during a capture, every call stream capture forbids or
// that would spoil it. No CUDA here. Invariant: while capture_underway(), the wrapped
// backend receives no event query, no device synchronization and no release of memory.
//
// Note [Capture underway]
// While a stream captures a CUDA graph (torch.cuda.graph: PyTorch tells the allocator
// through markCaptureBegin/markCaptureEnd, fragless::begin_capture/end_capture), CUDA
// rejects -- and, in the default global mode, invalidates the capture for -- calls such as
// cudaEventQuery, device synchronization and freeing memory, from any thread. So, like
// PyTorch's own allocator, fragless then:
//  - answers every event query "not ready" without asking CUDA: pending frees stay
//    pending, cached pages count as busy (no page moves or releases of them);
//  - fails device synchronizations and memory releases (unmap, cuMemRelease, cudaFree,
//    address-range frees) without calling CUDA: the callers already keep the memory and
//    retry later (the release paths' fault handling), so empty_cache, compaction and the
//    out-of-memory path give nothing back until the capture ends;
//  - makes its own allocation calls (cudaMalloc, cuMemCreate, cuMemMap, cuMemSetAccess,
//    cuMemAddressReserve) in relaxed capture mode (cuda_backend.cpp), as PyTorch does for
//    cudaMalloc: they are not stream work and the graph does not depend on them.
//  - never asks a capturing stream's device (cudaStreamGetDevice on it fails and spoils the
//    capture, seen on a GPU in the default global mode): a stream seen for the first time
//    while it captures is taken to be on the device the request names (cuda_backend.cpp;
//    PyTorch's allocator never asks at all).
//  - never reuses memory last used by another stream (which needs a cross-stream event
//    wait, and a capturing stream may not wait on work outside its capture): the large
//    pool places such a request in fresh memory instead (large_pool::wait_forbidden).
// Blocks used on other streams and freed during a capture get events recorded as usual;
// one recorded on a capturing stream can only complete through a later device
// synchronization (empty_cache or the out-of-memory path after the capture).
#pragma once

#include <atomic>
#include <memory>

#include "backend/backend.hpp"

namespace fragless::backend {

// Captures underway, for the whole library (header-only so the CUDA backend, which sits
// below the core, reads the same counter). Nesting: every enter is matched by one leave.
inline std::atomic<int>& captures_underway_count() noexcept {
  static std::atomic<int> count{0};
  return count;
}
inline void enter_capture() noexcept { captures_underway_count().fetch_add(1, std::memory_order_acq_rel); }
inline void leave_capture() noexcept {
  std::atomic<int>& count = captures_underway_count();
  int current = count.load(std::memory_order_acquire);
  while (current > 0 && !count.compare_exchange_weak(current, current - 1, std::memory_order_acq_rel)) {
  }
}
inline bool capture_underway() noexcept { return captures_underway_count().load(std::memory_order_acquire) > 0; }

// Note [Dormant mappings]: captures being set up (fragless::begin_capture between its flush
// of dormant ranges and enter_capture). While one is, or a capture is underway, a page move
// unmaps at once rather than leave a range a capture could not unmap.
inline std::atomic<int>& capture_setups_count() noexcept {
  static std::atomic<int> count{0};
  return count;
}
inline void enter_capture_setup() noexcept { capture_setups_count().fetch_add(1, std::memory_order_acq_rel); }
inline void leave_capture_setup() noexcept { capture_setups_count().fetch_sub(1, std::memory_order_acq_rel); }
inline bool unmaps_deferrable() noexcept {
  return capture_setups_count().load(std::memory_order_acquire) == 0 && !capture_underway();
}

std::unique_ptr<backend> make_capture_aware(std::unique_ptr<backend> wrapped);

}  // namespace fragless::backend
