// Helpers for allocator tests on simcuda: allocator instances with the real CUDA backend
// and chosen settings, streams, pattern fill, simcuda state resets, device-call counts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/allocator.hpp"

namespace fragless::testing {

std::unique_ptr<core::allocator> make_simcuda_allocator(const core::cache_settings& settings);
void* create_stream(int device = 0);
void destroy_stream(void* stream);
// Clears pending kernels, races, faults and counters of simcuda.
void reset_simcuda();
// Writes / checks a pattern derived from `seed` over [block, block + bytes) (host-addressable).
void fill_pattern(void* block, std::size_t bytes, std::uint64_t seed);
bool check_pattern(const void* block, std::size_t bytes, std::uint64_t seed);
std::string race_report();
// Makes `waiter` wait for the work queued on `source` so far (event record + wait).
void order_streams(void* waiter, void* source);
// FRAGLESS_TEST_OPS or the default.
long operations_from_env(long fallback);
// Device calls the stats count: physical allocations and frees, maps and unmaps.
std::int64_t device_calls(const device_stats& stats);
// The sizes of the physical chunks under a block, in address order (Note [Physical chunks]).
std::vector<std::size_t> chunk_bytes_under(core::device_cache& cache, void* block, std::size_t bytes);

}  // namespace fragless::testing
