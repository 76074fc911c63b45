// The pinned-page budget (Note [Pinned pages] in allocator/core/vmm_pool_growth.cpp), on
// simcuda, worked by hand:
//  - a block placed on part of a freed chunk pins the chunk's other free pages, and a block
//    created while they are pinned gets chunks of at most one page more than the budget
//    (physical_chunk_pinned_fraction of reserved memory) has left; with no budget the caps
//    alone decide, and reserved memory is the same either way;
//  - once the pinning block is gone the chunk is wholly free again (moved where the next
//    block lacks pages) and created chunks grow back to the caps;
//  - blocks' data survive, and the race oracle stays at zero.
// (The floor at half the run's share is in chunks_test.cpp, "a block large next to
// reserved memory takes few chunks".)
#include <catch2/catch.hpp>

#include <simcuda/control.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "simcuda_support.hpp"

using namespace fragless;
using namespace fragless::testing;

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kPage = 2 * kMiB;

struct pinned_run {
  std::size_t pinned_chunk_bytes = 0;  // the chunk the small block pins
  std::size_t reserved_before_bytes = 0;  // reserved memory before the pinned-time block
  std::vector<std::size_t> pinned_time_pieces;  // that block's chunks
  std::vector<std::size_t> after_pieces;  // a block's chunks after the pin is gone
  std::int64_t peak_reserved_bytes = 0;
};

pinned_run run_workload(double pinned_fraction) {
  reset_simcuda();
  core::cache_settings settings;
  settings.conf.physical_chunk_fraction = 1.0 / 8;
  settings.conf.physical_chunk_first_growth_bytes = 0;  // the fractions alone
  settings.conf.physical_chunk_pinned_fraction = pinned_fraction;
  settings.exact_start_allocations = 0;
  auto instance = make_simcuda_allocator(settings);
  core::device_cache& cache = instance->device(0);
  REQUIRE(cache.uses_vmm());
  pinned_run result;
  // 512 MiB held throughout (256 pages), then 64 MiB after it (32 whole pages).
  void* base = instance->allocate(512 * kMiB, 0, nullptr);
  fill_pattern(base, 512 * kMiB, 1);
  void* large = instance->allocate(64 * kMiB, 0, nullptr);
  REQUIRE(reinterpret_cast<std::uintptr_t>(large) % kPage == 0);
  const std::vector<std::size_t> large_pieces = chunk_bytes_under(cache, large, 64 * kMiB);
  REQUIRE(large_pieces.size() == 1);  // 1/8 of 512 MiB: one chunk of 32 pages
  result.pinned_chunk_bytes = large_pieces.front();
  // A one-page block after it closes its range, so that it stays the best fit once freed.
  void* fence = instance->allocate(2 * kMiB, 0, nullptr);
  fill_pattern(fence, 2 * kMiB, 5);
  REQUIRE(reinterpret_cast<std::uintptr_t>(fence) == reinterpret_cast<std::uintptr_t>(large) + 64 * kMiB);
  // Freed, then a 2 MiB block in its range (the best fit): 31 pages pinned.
  instance->deallocate(large);
  simcuda_complete_all();
  void* small = instance->allocate(2 * kMiB, 0, nullptr);
  fill_pattern(small, 2 * kMiB, 2);
  const auto small_at = reinterpret_cast<std::uintptr_t>(small);
  REQUIRE(small_at >= reinterpret_cast<std::uintptr_t>(large));
  REQUIRE(small_at + 2 * kMiB <= reinterpret_cast<std::uintptr_t>(large) + 64 * kMiB);
  // 128 MiB (64 pages) fits no free range: every page created, no chunk free to move.
  result.reserved_before_bytes = static_cast<std::size_t>(cache.stats().reserved_bytes[pool_all].current);
  void* pinned_time = instance->allocate(128 * kMiB, 0, nullptr);
  fill_pattern(pinned_time, 128 * kMiB, 3);
  result.pinned_time_pieces = chunk_bytes_under(cache, pinned_time, 128 * kMiB);
  // The pin goes: the 32-page chunk is wholly free, and another 128 MiB takes it (a move)
  // and creates the rest.
  instance->deallocate(small);
  simcuda_complete_all();
  void* after = instance->allocate(128 * kMiB, 0, nullptr);
  fill_pattern(after, 128 * kMiB, 4);
  result.after_pieces = chunk_bytes_under(cache, after, 128 * kMiB);
  CHECK(check_pattern(base, 512 * kMiB, 1));
  CHECK(check_pattern(pinned_time, 128 * kMiB, 3));
  CHECK(check_pattern(after, 128 * kMiB, 4));
  CHECK(check_pattern(fence, 2 * kMiB, 5));
  result.peak_reserved_bytes = cache.stats().reserved_bytes[pool_all].peak;
  for (void* block : {base, fence, pinned_time, after}) instance->deallocate(block);
  INFO(race_report());
  CHECK(simcuda_race_count() == 0);
  return result;
}

std::size_t largest(const std::vector<std::size_t>& pieces) {
  return pieces.empty() ? 0 : *std::max_element(pieces.begin(), pieces.end());
}

}  // namespace

TEST_CASE("pinned pages: a budget shrinks the chunks made while chunks pin free pages", "[chunks]") {
  const pinned_run budgeted = run_workload(1.0 / 8);
  const pinned_run unbudgeted = run_workload(0.0);
  REQUIRE(budgeted.pinned_chunk_bytes == 64 * kMiB);
  REQUIRE(budgeted.reserved_before_bytes == unbudgeted.reserved_before_bytes);
  // By hand: 289 pages reserved (256 + 32 + 1) before the block; 31 pages pinned. Each
  // chunk of its 64-page run has at most the reserved share (1/8 of reserved memory at
  // that moment) and one page more than the budget (1/8 too) has left over the 31 pinned
  // -- first 36 - 31 + 1 = 6 pages, growing with reserved memory (half the run's share of
  // 64 pages is 1). With no budget: 36 pages, then the 28 left.
  const std::size_t reserved_pages = budgeted.reserved_before_bytes / kPage;
  CHECK(reserved_pages == 289);
  std::vector<std::size_t> expected;
  for (std::size_t reserved = reserved_pages, left = 64; left > 0;) {
    const std::size_t share = reserved / 8;
    const std::size_t budget_left = share > 31 ? share - 31 : 0;
    const std::size_t chunk = std::min({share, budget_left + 1, left});
    expected.push_back(chunk * kPage);
    reserved += chunk;
    left -= chunk;
  }
  INFO("chunks while pinned: " << budgeted.pinned_time_pieces.size() << " (by hand " << expected.size()
                               << "), largest " << largest(budgeted.pinned_time_pieces) / kMiB
                               << " MiB; no budget: " << unbudgeted.pinned_time_pieces.size() << ", largest "
                               << largest(unbudgeted.pinned_time_pieces) / kMiB << " MiB");
  CHECK(budgeted.pinned_time_pieces == expected);
  CHECK(expected.front() == 6 * kPage);
  CHECK(unbudgeted.pinned_time_pieces == std::vector<std::size_t>{36 * kPage, 28 * kPage});
  // Once the pin is gone, the old chunk is moved whole and what is created beside it is
  // one chunk again (nothing pinned: the caps alone).
  INFO("chunks after: " << budgeted.after_pieces.size() << ", largest " << largest(budgeted.after_pieces) / kMiB
                        << " MiB");
  CHECK(budgeted.after_pieces.size() == 2);
  CHECK(std::count(budgeted.after_pieces.begin(), budgeted.after_pieces.end(), 64 * kMiB) == 2);
  CHECK(budgeted.peak_reserved_bytes == unbudgeted.peak_reserved_bytes);
}
