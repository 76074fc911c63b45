// Shared by the c10 adapter's tests (torch_allocator_test.cpp, torch_pool_test.cpp): fragless
// installed as c10's CUDA allocator once per process, before anything is allocated natively.
#pragma once

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>

#include <catch2/catch.hpp>
#include <cstddef>

#include "fragless/torch.hpp"
#include "torch_test_support.hpp"

namespace fragless::torch_test {

// The index of the "all" entry of a c10 stat array.
inline constexpr std::size_t kAll = 0;

inline void require_installed() {
  install_libtorch_cuda_hooks();
  static const bool installed = [] {
    REQUIRE_FALSE(c10::cuda::CUDACachingAllocator::get()->initialized());  // nothing allocated natively yet
    fragless::torch::install();
    c10::cuda::CUDACachingAllocator::init(c10::cuda::device_count());
    return true;
  }();
  REQUIRE(installed);
}

}  // namespace fragless::torch_test
