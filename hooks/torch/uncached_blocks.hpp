// PyTorch's disabled mode (torch.cuda.memory.caching_allocator_enable(False)): while the
// caching allocator is disabled, every tensor is one cudaMalloc and its free one cudaFree,
// outside the allocator's stats, snapshot and history -- what PyTorch's allocator does.
// Invariant: a pointer handed out here goes back through cudaFree exactly once (its DataPtr
// deleter, or raw_delete finding it in the set of raw pointers), never through fragless.
#pragma once

#include <atomic>
#include <cstddef>
#include <mutex>
#include <unordered_set>

namespace fragless::torch {

class uncached_blocks {
 public:
  // cudaMalloc on the device. @throws c10::Error (CUDA's out-of-memory error as PyTorch raises it)
  void* allocate(std::size_t size_bytes, int device);
  // raw_alloc's blocks are remembered so that raw_delete can tell them from fragless's.
  void* allocate_raw(std::size_t size_bytes, int device);
  // Frees a raw block of this set; false (nothing done) for any other pointer.
  // Cheap while no raw block is out: one relaxed load.
  bool free_raw(void* pointer) noexcept;
  // The DataPtr deleter of uncached tensors (cudaFree; errors are cleared, never thrown).
  static void delete_block(void* pointer) noexcept;

 private:
  std::mutex mutex_;  // guards raw_
  std::unordered_set<void*> raw_;
  std::atomic<std::size_t> raw_count_{0};
};

}  // namespace fragless::torch
