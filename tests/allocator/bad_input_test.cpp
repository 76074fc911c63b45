// Bad input through the public C ABI and C++ API (the global allocator, on simcuda):
// every misuse gets a clear error and corrupts nothing.
#include <catch2/catch.hpp>

#include <simcuda/control.h>

#include <string>

#include "consistency.hpp"
#include "fragless/fragless.h"
#include "fragless/fragless.hpp"
#include "simcuda_support.hpp"

using namespace fragless;

TEST_CASE("C ABI: allocation and free round trip", "[bad_input][c_abi]") {
  void* block = fragless_malloc(1 << 20, 0, nullptr);
  REQUIRE(block != nullptr);
  CHECK(simcuda_is_accessible(block, 1 << 20));
  fragless_free(block, 1 << 20, 0, nullptr);
  void* pointer = reinterpret_cast<void*>(1);
  CHECK(fragless_allocate(&pointer, 0, 0, nullptr) == FRAGLESS_OK);
  CHECK(pointer == nullptr);  // size 0: NULL, no error
  CHECK(fragless_deallocate(nullptr) == FRAGLESS_OK);
}

TEST_CASE("C ABI: bad pointers, double free, bad sizes, bad devices", "[bad_input][c_abi]") {
  void* stream = testing::create_stream(0);
  void* block = nullptr;
  REQUIRE(fragless_allocate(&block, 3 << 20, 0, stream) == FRAGLESS_OK);
  void* small = nullptr;
  REQUIRE(fragless_allocate(&small, 100, 0, stream) == FRAGLESS_OK);

  CHECK(fragless_deallocate(static_cast<char*>(block) + 4096) == FRAGLESS_ERROR_INVALID_POINTER);
  CHECK(std::string(fragless_last_error()).find("4096 bytes into a block") != std::string::npos);
  CHECK(fragless_deallocate(reinterpret_cast<void*>(0xdead000)) == FRAGLESS_ERROR_INVALID_POINTER);
  CHECK(std::string(fragless_last_error()).find("did not allocate or has already freed") != std::string::npos);
  CHECK(fragless_record_stream(reinterpret_cast<void*>(0xdead000), stream) == FRAGLESS_ERROR_INVALID_POINTER);

  void* huge = reinterpret_cast<void*>(1);
  CHECK(fragless_allocate(&huge, simcuda_capacity(0) + 1, 0, stream) == FRAGLESS_ERROR_OUT_OF_MEMORY);
  CHECK(huge == nullptr);
  CHECK(std::string(fragless_last_error()).rfind("CUDA out of memory. Tried to allocate", 0) == 0);
  CHECK(fragless_malloc(SIZE_MAX, 0, stream) == nullptr);
  CHECK(fragless_allocate(&huge, 1024, 99, stream) == FRAGLESS_ERROR_INVALID_ARGUMENT);
  CHECK(fragless_allocate(&huge, 1024, -1, stream) == FRAGLESS_ERROR_INVALID_ARGUMENT);
  CHECK(fragless_set_memory_fraction(1.5, 0) == FRAGLESS_ERROR_INVALID_ARGUMENT);
  CHECK(fragless_allocate(nullptr, 1024, 0, stream) == FRAGLESS_ERROR_INVALID_ARGUMENT);

  // Nothing was corrupted: the blocks are still live and free fine, exactly once.
  testing::check_consistency(snapshot(0), get_device_stats(0));
  CHECK(fragless_deallocate(block) == FRAGLESS_OK);
  CHECK(fragless_deallocate(small) == FRAGLESS_OK);
  CHECK(fragless_deallocate(block) == FRAGLESS_ERROR_INVALID_POINTER);
  CHECK(fragless_deallocate(small) == FRAGLESS_ERROR_INVALID_POINTER);
  testing::check_consistency(snapshot(0), get_device_stats(0));
  testing::destroy_stream(stream);
}

TEST_CASE("C++ API: exception types", "[bad_input]") {
  void* block = allocate(1 << 20, 0, nullptr);
  CHECK_THROWS_AS(deallocate(static_cast<char*>(block) + 512), invalid_pointer_error);
  CHECK_THROWS_AS(allocate(std::size_t{1} << 50, 0, nullptr), out_of_memory_error);
  CHECK_THROWS_AS(allocate(1, 42, nullptr), invalid_argument_error);
  try {
    allocate(std::size_t{1} << 50, 0, nullptr);
  } catch (const error& failure) {
    CHECK(failure.code() == error_code::out_of_memory);
  }
  deallocate(block);
  CHECK_THROWS_AS(deallocate(block), invalid_pointer_error);
  CHECK_NOTHROW(deallocate(nullptr));
}

TEST_CASE("a stream of another device is refused", "[bad_input][devices]") {
  if (simcuda_capacity(1) == 0) {
    FAIL("this test needs SIMCUDA_DEVICES=2 (set by its ctest entry)");
  }
  void* other_device_stream = testing::create_stream(1);
  REQUIRE(other_device_stream != nullptr);
  // A fresh allocator: streams are known by handle value, and an earlier test's destroyed
  // stream may have had this handle (see Note [Stream reuse]).
  auto instance = testing::make_simcuda_allocator(core::cache_settings{});
  try {
    instance->allocate(1 << 20, 0, other_device_stream);
    FAIL("expected invalid_argument_error");
  } catch (const invalid_argument_error& failure) {
    CHECK(std::string(failure.what()).find("belongs to device 1") != std::string::npos);
  }
  void* block = instance->allocate(1 << 20, 1, other_device_stream);  // the right device accepts it
  CHECK(block != nullptr);
  instance->deallocate(block);
  // Through the C ABI: record_stream always checks the stream's device.
  REQUIRE(fragless_allocate(&block, 1 << 20, 0, nullptr) == FRAGLESS_OK);
  CHECK(fragless_record_stream(block, other_device_stream) == FRAGLESS_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(fragless_last_error()).find("belongs to device 1") != std::string::npos);
  CHECK(fragless_deallocate(block) == FRAGLESS_OK);
  testing::check_consistency(snapshot(0), get_device_stats(0));
  testing::destroy_stream(other_device_stream);
}

// Note [Device arguments]: one rule for the control calls, an index or -1 (every device).
// Last in this file: resetting the accumulated stats of the global allocator ends the
// allocated - freed == current invariant the cases above check.
TEST_CASE("C ABI: control calls take a device index or -1, nothing else", "[bad_input][c_abi][devices]") {
  void* stream = testing::create_stream(0);
  void* block = nullptr;
  REQUIRE(fragless_allocate(&block, 1 << 20, 0, stream) == FRAGLESS_OK);
  std::size_t released = 0, unmapped = 0;
  CHECK(fragless_trim(-5, 0, &released) == FRAGLESS_ERROR_INVALID_ARGUMENT);
  CHECK(fragless_compact(-2, &released, &unmapped) == FRAGLESS_ERROR_INVALID_ARGUMENT);
  CHECK(fragless_empty_cache(-3, &released) == FRAGLESS_ERROR_INVALID_ARGUMENT);
  CHECK(fragless_reset_peak_stats(-7) == FRAGLESS_ERROR_INVALID_ARGUMENT);
  CHECK(fragless_reset_accumulated_stats(-4) == FRAGLESS_ERROR_INVALID_ARGUMENT);
  CHECK(fragless_reset_accumulated_stats(99) == FRAGLESS_ERROR_INVALID_ARGUMENT);
  CHECK(fragless_reset_accumulated_stats(-1) == FRAGLESS_OK);
  CHECK(fragless_reset_peak_stats(-1) == FRAGLESS_OK);
  CHECK(fragless_trim(-1, SIZE_MAX, &released) == FRAGLESS_OK);
  CHECK(fragless_compact(-1, nullptr, nullptr) == FRAGLESS_OK);
  CHECK(fragless_deallocate(block) == FRAGLESS_OK);
  testing::destroy_stream(stream);
}
