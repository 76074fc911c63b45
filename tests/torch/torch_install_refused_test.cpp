// install() after c10's native allocator was initialised is refused with the documented
// error (a separate process: the refusal can only be seen before fragless is installed).
#include <c10/cuda/CUDACachingAllocator.h>

#include <catch2/catch.hpp>
#include <string>

#include "fragless/torch.hpp"
#include "torch_test_support.hpp"

namespace allocator = c10::cuda::CUDACachingAllocator;

TEST_CASE("torch install: refused once the native allocator is initialised") {
  fragless::torch_test::install_libtorch_cuda_hooks();
  allocator::init(c10::cuda::device_count());
  void* native_block = allocator::raw_alloc(4096);
  REQUIRE(native_block != nullptr);
  REQUIRE(allocator::get()->name() != "fragless");

  try {
    fragless::torch::install();
    FAIL("install() succeeded over an initialised allocator");
  } catch (const fragless::torch::install_error& refusal) {
    CHECK(std::string(refusal.what()).find("already initialised") != std::string::npos);
  }
  CHECK_FALSE(fragless::torch::is_installed());
  CHECK(allocator::get()->name() != "fragless");  // nothing changed

  char message[256] = {};
  CHECK(fragless_torch_install(message, sizeof message) == 2);
  CHECK(std::string(message).find("before the first CUDA allocation") != std::string::npos);
  allocator::raw_delete(native_block);  // still the native allocator's block
}
