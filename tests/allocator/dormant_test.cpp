// Note [Dormant mappings], with a fake backend that keeps the driver's mapping rules (a
// handle mapped whole, at any number of addresses; nothing mapped over a mapping; no
// release while mapped): the table's invariants under random operations against a model,
// a moved chunk left mapped where it was and taken back for no call, deferred unmaps made
// when the address is needed, on release, before a capture and at teardown, and refusals of
// those unmaps leaving the pool consistent.
#include <catch2/catch.hpp>

#include <map>
#include <random>

#include "backend/capture_aware_backend.hpp"
#include "core/dormant_mappings.hpp"
#include "fake_random_operations.hpp"

using namespace fragless;
using fragless::testing::fake_backend;

namespace {

constexpr std::size_t kPage = std::size_t{2} << 20;

std::int64_t device_calls(const device_stats& stats) {
  return stats.num_map + stats.num_unmap + stats.num_device_alloc + stats.num_device_free;
}

// One whole-page chunk per page of a small program (Note [Physical chunks]); pure moving,
// no plans, no automatic compaction: each step below is the pool's own choice.
core::cache_settings moving_settings() {
  core::cache_settings settings = core::cache_settings::for_backend(true);
  settings.conf.loop_plans = false;
  settings.conf.page_move_budget = false;
  settings.conf.compact_threshold_bytes = fragless::unlimited_bytes;
  settings.exact_start_allocations = 0;
  settings.conf.physical_chunk_first_growth_bytes = 0;  // one chunk per page: moves of one page
  return settings;
}

struct fixture : fragless::testing::fake_fixture {
  fixture() : fake_fixture(std::uint64_t{1} << 30, moving_settings()) {}
};

// X (two pages) freed below a fence Y; Z (three pages: too large for X's hole) past Y
// takes X's two pages by moves and creates a third.
struct moved_pair {
  void* fence = nullptr;
  void* z = nullptr;
};
moved_pair move_two_pages(fixture& f) {
  void* x = f.instance.allocate(2 * kPage, 0, nullptr);
  moved_pair moved;
  moved.fence = f.instance.allocate(kPage, 0, nullptr);
  f.instance.deallocate(x);
  moved.z = f.instance.allocate(3 * kPage, 0, nullptr);
  return moved;
}

}  // namespace

TEST_CASE("dormant table: random adds, removes, swaps and orphans match a model", "[dormant][property]") {
  constexpr std::size_t kPages = 512;
  core::dormant_mappings table(kPages);
  struct entry {
    std::size_t pages;
    backend::physical_handle handle;
    std::size_t active_head;
    bool orphaned;
  };
  std::map<std::size_t, entry> model;  // head -> entry
  std::mt19937_64 random(7);
  backend::physical_handle next_handle = 1;
  auto free_run = [&](std::size_t head, std::size_t pages) {
    if (head + pages > kPages) return false;
    for (const auto& [other_head, other] : model)
      if (other_head < head + pages && head < other_head + other.pages) return false;
    return true;
  };
  for (int step = 0; step < 20000; ++step) {
    const auto choice = random() % 10;
    const std::size_t head = random() % kPages;
    const std::size_t pages = 1 + random() % 6;
    if (choice < 4) {
      if (!free_run(head, pages)) continue;
      const std::size_t active = random() % 2 ? random() % kPages : core::dormant_mappings::npos;
      REQUIRE(table.add(head, pages, next_handle, active));
      model[head] = entry{pages, next_handle++, active, false};
    } else if (choice < 6 && !model.empty()) {
      auto at = std::next(model.begin(), static_cast<long>(random() % model.size()));
      table.remove(at->first);
      model.erase(at);
    } else if (choice < 8 && !model.empty()) {
      // A chunk mapped at a free place of its own length goes back to its dormant range.
      auto at = std::next(model.begin(), static_cast<long>(random() % model.size()));
      if (at->second.orphaned) continue;
      const std::size_t active = random() % kPages;
      const entry moved = at->second;
      const std::size_t old_head = at->first;
      model.erase(at);
      if (!free_run(active, moved.pages)) {
        model[old_head] = moved;
        continue;
      }
      table.set_active_head(moved.handle, active);
      table.swap_with_active(old_head);
      model[active] = entry{moved.pages, moved.handle, old_head, false};
    } else if (!model.empty()) {
      auto at = std::next(model.begin(), static_cast<long>(random() % model.size()));
      table.orphan(at->second.handle);
      at->second.orphaned = true;
      at->second.active_head = core::dormant_mappings::npos;
    }
    // The walker: every model range is found from each of its pages and by its handle
    // (orphans by pages only), nothing else is, and the counts agree.
    if (step % 97 != 0) continue;
    REQUIRE(table.size() == model.size());
    std::size_t orphans = 0;
    for (const auto& [range_head, expected] : model) {
      const core::dormant_mappings::mapping* found = table.starting_at(range_head);
      REQUIRE(found != nullptr);
      CHECK(found->pages == expected.pages);
      CHECK(found->orphaned == expected.orphaned);
      if (!expected.orphaned) {
        CHECK(found->active_head == expected.active_head);
        CHECK(table.of_handle(expected.handle) == found);
      } else {
        ++orphans;
        CHECK(table.of_handle(expected.handle) == nullptr);
      }
      CHECK(table.first_overlapping(range_head + expected.pages - 1, range_head + expected.pages) == found);
    }
    CHECK((table.first_orphan() != nullptr) == (orphans > 0));
    std::size_t covered = 0;
    for (std::size_t page = 0; page < kPages;) {
      const core::dormant_mappings::mapping* found = table.first_overlapping(page, kPages);
      if (found == nullptr) break;
      REQUIRE(model.count(found->head) == 1);
      covered += found->pages;
      page = found->head + found->pages;
    }
    std::size_t expected_pages = 0;
    for (const auto& [range_head, expected] : model) expected_pages += expected.pages;
    CHECK(covered == expected_pages);
  }
}

TEST_CASE("a moved chunk stays mapped where it was, and comes back there for no call", "[dormant]") {
  fixture f;
  const moved_pair moved = move_two_pages(f);
  const device_stats after_move = f.cache().stats();
  CHECK(after_move.num_page_moves == 2);
  CHECK(after_move.num_unmap == 0);                      // deferred
  CHECK(f.device_backend->aliased_handles() == 2);       // two one-page chunks, each at two addresses
  // The memory is counted once: reserved bytes are the physical bytes.
  CHECK(f.device_backend->used_bytes() == static_cast<std::uint64_t>(after_move.reserved_bytes[pool_all].current));
  CHECK(after_move.reserved_bytes[pool_all].current == static_cast<std::int64_t>(4 * kPage));

  // Z goes; W, of X's size, fits X's old range best and takes the two chunks back from
  // Z's first pages: no call.
  f.instance.deallocate(moved.z);
  void* w = f.instance.allocate(2 * kPage, 0, nullptr);
  const device_stats after_return = f.cache().stats();
  CHECK(after_return.num_dormant_returns == 2);
  CHECK(device_calls(after_return) == device_calls(after_move));
  CHECK(f.device_backend->is_mapped(reinterpret_cast<std::uintptr_t>(w), 2 * kPage));
  CHECK(f.device_backend->aliased_handles() == 2);  // now dormant where Z was

  // V needs Z's first two pages while W holds the chunks dormant there: both deferred
  // unmaps are made now; the first page takes Z's third page's chunk by a move (dormant
  // where it was), the second is created.
  void* v = f.instance.allocate(2 * kPage, 0, nullptr);
  const device_stats after_growth = f.cache().stats();
  CHECK(after_growth.num_unmap == 2);
  CHECK(after_growth.num_page_moves == after_return.num_page_moves + 1);
  CHECK(after_growth.num_device_alloc == after_return.num_device_alloc + 1);
  CHECK(f.device_backend->aliased_handles() == 1);
  CHECK(f.device_backend->is_mapped(reinterpret_cast<std::uintptr_t>(v), 2 * kPage));
  f.check();
  for (void* block : {moved.fence, w, v}) f.instance.deallocate(block);
  f.check();
}

TEST_CASE("releasing a moved chunk unmaps both its mappings; teardown leaves nothing mapped", "[dormant]") {
  {
    fixture f;
    const moved_pair moved = move_two_pages(f);
    REQUIRE(f.device_backend->aliased_handles() == 2);
    f.instance.deallocate(moved.z);
    f.instance.deallocate(moved.fence);
    f.cache().release_cache(0);
    CHECK(f.device_backend->mapping_count() == 0);
    CHECK(f.device_backend->used_bytes() == 0);
    f.check();
  }
  {
    fixture f;
    const moved_pair moved = move_two_pages(f);
    REQUIRE(f.device_backend->aliased_handles() == 2);
    (void)moved;  // still live at teardown: the program's leak, given back all the same
  }
  CHECK(fake_backend::last_left_over().mappings == 0);
  CHECK(fake_backend::last_left_over().handles == 0);
}

TEST_CASE("before a capture every dormant range is unmapped, so the capture needs no unmap", "[dormant][capture]") {
  auto* fake = new fake_backend(std::uint64_t{1} << 30, true);
  core::allocator instance(backend::make_capture_aware(std::unique_ptr<backend::backend>(fake)), moving_settings());
  core::device_cache& cache = instance.device(0);
  void* x = instance.allocate(2 * kPage, 0, nullptr);
  void* fence = instance.allocate(kPage, 0, nullptr);
  instance.deallocate(x);
  void* z = instance.allocate(3 * kPage, 0, nullptr);
  REQUIRE(fake->aliased_handles() == 2);
  cache.unmap_dormant_ranges();  // what fragless::begin_capture does for every cache
  CHECK(fake->aliased_handles() == 0);
  CHECK(cache.stats().num_unmap == 2);
  backend::enter_capture();
  // Over X's old range: new pages, mapped with no unmap first (a capture refuses unmaps).
  void* w = instance.allocate(2 * kPage, 0, nullptr);
  backend::leave_capture();
  CHECK(fake->is_mapped(reinterpret_cast<std::uintptr_t>(w), 2 * kPage));
  CHECK(cache.stats().num_unmap == 2);
  for (void* block : {fence, z, w}) instance.deallocate(block);
  fragless::testing::check_consistency(cache.snapshot(), cache.stats());
}

TEST_CASE("while a capture is being set up a move unmaps at once, leaving no dormant range", "[dormant][capture]") {
  // begin_capture raises the setup count before it flushes the dormant ranges: a move made
  // on another thread from then on must not leave one, or a block placed over it during the
  // capture would need the unmap the capture refuses.
  fixture f;
  backend::enter_capture_setup();
  const moved_pair moved = move_two_pages(f);
  backend::leave_capture_setup();
  const device_stats stats = f.cache().stats();
  CHECK(stats.num_page_moves == 2);
  CHECK(stats.num_unmap == 2);  // made at once
  CHECK(f.device_backend->aliased_handles() == 0);
  // Once the setup is over, moves defer again: with Z gone, a block of X's size fits X's
  // old range best and takes two of Z's chunks there, leaving them dormant where Z was.
  f.instance.deallocate(moved.z);
  void* w = f.instance.allocate(2 * kPage, 0, nullptr);
  CHECK(f.cache().stats().num_page_moves == stats.num_page_moves + 2);
  CHECK(f.cache().stats().num_unmap == stats.num_unmap);
  CHECK(f.device_backend->aliased_handles() == 2);
  f.check();
  for (void* block : {moved.fence, w}) f.instance.deallocate(block);
  f.check();
}

TEST_CASE("a refused deferred unmap fails only that mapping, and a refused one on release is retried", "[dormant][faults]") {
  SECTION("the address is needed") {
    fixture f;
    const moved_pair moved = move_two_pages(f);
    f.device_backend->fail_next = "unmap";
    // V fits X's old range, whose chunks Z holds: the first deferred unmap is refused.
    void* v = nullptr;
    try {
      v = f.instance.allocate(2 * kPage, 0, nullptr);
    } catch (const fragless::error&) {
      // a refused device call may fail the request, as any refused map does
    }
    f.check();
    void* again = f.instance.allocate(2 * kPage, 0, nullptr);  // the device answers again
    CHECK(f.device_backend->is_mapped(reinterpret_cast<std::uintptr_t>(again), 2 * kPage));
    for (void* block : {moved.fence, moved.z, v, again})
      if (block != nullptr) f.instance.deallocate(block);
    f.cache().release_cache(0);
    CHECK(f.device_backend->used_bytes() == 0);
    f.check();
  }
  SECTION("the chunk is released") {
    fixture f;
    const moved_pair moved = move_two_pages(f);
    f.instance.deallocate(moved.z);
    f.instance.deallocate(moved.fence);
    // The pass goes highest first: Z's created page (one unmap), then Z's second page --
    // its mapping, then its dormant range where X's second page was, refused here. That
    // range is an orphan, the handle's release waits for it, and the next pass unmaps it
    // and releases the handle.
    f.device_backend->fail_next = "unmap";
    f.device_backend->fail_skip = 2;
    f.cache().release_cache(0);
    CHECK(f.device_backend->mapping_count() == 1);
    CHECK(f.device_backend->used_bytes() == kPage);
    CHECK(f.cache().stats().reserved_bytes[pool_all].current == 0);
    f.check();
    f.cache().compact();
    CHECK(f.device_backend->mapping_count() == 0);
    CHECK(f.device_backend->used_bytes() == 0);
    CHECK(f.device_backend->aliased_handles() == 0);
    f.check();
  }
}
