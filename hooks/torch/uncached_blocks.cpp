// cudaMalloc / cudaFree per tensor while PyTorch's caching allocator is disabled (see
// uncached_blocks.hpp).
#include "uncached_blocks.hpp"

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>

namespace fragless::torch {

void* uncached_blocks::allocate(std::size_t size_bytes, int device) {
  if (size_bytes == 0) return nullptr;
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  void* pointer = nullptr;
  C10_CUDA_CHECK(cudaMalloc(&pointer, size_bytes));
  return pointer;
}

void* uncached_blocks::allocate_raw(std::size_t size_bytes, int device) {
  void* pointer = allocate(size_bytes, device);
  if (pointer == nullptr) return nullptr;
  try {
    std::lock_guard lock(mutex_);
    raw_.insert(pointer);
    raw_count_.store(raw_.size(), std::memory_order_relaxed);
  } catch (...) {
    delete_block(pointer);
    throw;
  }
  return pointer;
}

bool uncached_blocks::free_raw(void* pointer) noexcept {
  if (raw_count_.load(std::memory_order_relaxed) == 0) return false;
  {
    std::lock_guard lock(mutex_);
    if (raw_.erase(pointer) == 0) return false;
    raw_count_.store(raw_.size(), std::memory_order_relaxed);
  }
  delete_block(pointer);
  return true;
}

void uncached_blocks::delete_block(void* pointer) noexcept {
  if (pointer == nullptr) return;
  if (cudaFree(pointer) != cudaSuccess) (void)cudaGetLastError();  // free paths never throw
}

}  // namespace fragless::torch
