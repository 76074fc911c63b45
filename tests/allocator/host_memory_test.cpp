// The allocator when the host runs out of memory: this binary replaces the global
// operator new with one that can be told to fail (Note [Pending without host memory],
// Note [Index nodes]). A free after record_stream() fails each of its host allocations in
// turn, once and for good: it never throws (it is noexcept: a throw would terminate), the
// block is never handed out while a stream may still use it -- kept pending, or freed
// after a device synchronization -- the stats stay consistent, and no event of the pool is
// lost (every one created is destroyed at teardown). A free-index insert fails each of its
// two nodes: both trees still agree. An empty slab going back to the large pool fails each
// of its host allocations: the range is kept pending and given back at the next scan.
// Random operations fail allocations and record_stream() (the cache must be exactly as it
// was: the full walk after each), or every kind once (the walk after each, and everything
// given back at the end), or frees, cache releases and a loop plan's steps persistently
// too (no two live blocks overlap, and everything is given back at teardown). The fake
// backend's own maps are spared: they stand for the driver's bookkeeping, not the
// program's heap.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>
#include <random>
#include <utility>
#include <vector>

#include "core/free_index.hpp"
#include "fake_random_operations.hpp"

namespace {
// Allocations left before the injected failure; negative: none armed.
std::atomic<long> allocations_before_failure{-1};
// Whether the failure, once reached, goes on (host memory gone) or strikes once.
std::atomic<bool> failure_persists{false};
std::atomic<long> failures_injected{0};
}  // namespace

// GCC reads free() in the replaced operator delete, inlined into a caller of new, as a
// mismatch; here new is malloc by construction.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

void* operator new(std::size_t size_bytes) {
  long left = allocations_before_failure.load(std::memory_order_relaxed);
  if (left >= 0 && !fragless::testing::fake_backend::in_own_bookkeeping()) {
    if (left == 0) {
      if (!failure_persists.load(std::memory_order_relaxed)) allocations_before_failure.store(-1);
      failures_injected.fetch_add(1);
      throw std::bad_alloc();
    }
    allocations_before_failure.store(left - 1);
  }
  void* memory = std::malloc(size_bytes == 0 ? 1 : size_bytes);
  if (memory == nullptr) throw std::bad_alloc();
  return memory;
}
// Every form that pairs with these, so that no block crosses between this heap and the
// library's (or a sanitizer's) default one. The aligned forms keep their own pair.
void* operator new[](std::size_t size_bytes) { return operator new(size_bytes); }
void* operator new(std::size_t size_bytes, const std::nothrow_t&) noexcept {
  try {
    return operator new(size_bytes);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t size_bytes, const std::nothrow_t&) noexcept {
  return operator new(size_bytes, std::nothrow);
}
void operator delete(void* memory) noexcept { std::free(memory); }
void operator delete[](void* memory) noexcept { std::free(memory); }
void operator delete(void* memory, std::size_t) noexcept { std::free(memory); }
void operator delete[](void* memory, std::size_t) noexcept { std::free(memory); }
void operator delete(void* memory, const std::nothrow_t&) noexcept { std::free(memory); }
void operator delete[](void* memory, const std::nothrow_t&) noexcept { std::free(memory); }

using namespace fragless;
using fragless::testing::fake_backend;
using fragless::testing::stream_number;

namespace {
// Ends the injection, before the test's own bookkeeping allocates.
void disarm() noexcept { allocations_before_failure.store(-1); }
}  // namespace

namespace {

// Frees, with host allocation number `failing_allocation` (0-based) of the free failing,
// a block that three other streams used, and checks what is above. False once the free
// made fewer allocations than that (every point has been failed).
bool free_with_failure(bool vmm, std::size_t size_bytes, long failing_allocation, bool persists) {
  core::cache_settings settings = core::cache_settings::for_backend(vmm);
  settings.exact_start_allocations = 0;  // small blocks in slabs, large ones in the large pool
  fragless::testing::fake_fixture f(1ull << 30, settings);
  void* const allocated_on = stream_number(1);
  void* block = f.instance.allocate(size_bytes, 0, allocated_on);
  REQUIRE(block != nullptr);
  for (std::uintptr_t other = 2; other <= 4; ++other) f.instance.record_stream(block, stream_number(other));
  f.device_backend->events_complete = false;  // the other streams are still busy
  const std::int64_t synchronizations_before = f.cache().stats().num_sync_all_streams;
  failures_injected.store(0);
  failure_persists.store(persists);
  allocations_before_failure.store(failing_allocation);
  f.instance.deallocate(block);
  allocations_before_failure.store(-1);
  const bool failed = failures_injected.load() > 0;
  const bool synchronized = f.cache().stats().num_sync_all_streams > synchronizations_before;
  f.check();
  // Kept pending, or freed after a device synchronization (Note [Pending without host
  // memory]); a failure that persists leaves no room to keep it pending.
  if (persists && failed) CHECK(synchronized);
  if (!failed) CHECK_FALSE(synchronized);
  // While the other streams may still use it, the block is not handed out again.
  void* other = f.instance.allocate(size_bytes, 0, allocated_on);
  if (!synchronized) CHECK(other != block);
  f.instance.deallocate(other);
  f.device_backend->events_complete = true;
  void* later = f.instance.allocate(size_bytes, 0, allocated_on);  // completes what it can
  f.instance.deallocate(later);
  f.cache().release_cache(0);
  return failed;
}

}  // namespace

TEST_CASE("a free whose pending entry cannot be held loses no event and stays safe", "[host-memory]") {
  const bool vmm = GENERATE(true, false);
  const std::size_t size_bytes = GENERATE(std::size_t{512}, std::size_t{8} << 20);
  const bool persists = GENERATE(false, true);
  INFO("vmm " << vmm << ", " << size_bytes << " bytes, failure persists " << persists);
  long points = 0;
  for (long failing = 0; failing < 64; ++failing) {
    INFO("failing allocation " << failing);
    const bool failed = free_with_failure(vmm, size_bytes, failing, persists);
    CHECK(fake_backend::last_left_over().events == 0);
    if (!failed) break;
    ++points;
  }
  // The free allocates (the events' list, the pending entry): each was failed in turn.
  CHECK(points >= 2);
  CHECK(points < 64);
}

// An empty slab beyond the one a class keeps goes back to the large pool; where the pool
// cannot index it (no host memory for its free range), it is kept pending with no event
// and the next scan gives it back (Note [Pending without host memory]). Failing each of
// the emptying free's host allocations in turn: the full walk holds after the free, and
// once a large allocation has scanned the pending list and the cache is released, every
// byte is given back.
TEST_CASE("an empty slab the large pool cannot take back is given back at the next scan", "[host-memory]") {
  const bool vmm = GENERATE(true, false);
  INFO("vmm " << vmm);
  long kept_pending = 0, points = 0;
  for (long failing = 0; failing < 64; ++failing) {
    INFO("failing allocation " << failing);
    core::cache_settings settings = core::cache_settings::for_backend(vmm);
    settings.exact_start_allocations = 0;  // small blocks in slabs from the start
    fragless::testing::fake_fixture f(1ull << 30, settings);
    void* const stream = stream_number(1);
    std::vector<void*> objects;
    while (f.cache().stats().segment[pool_small].current < 2) {
      objects.push_back(f.instance.allocate(512, 0, stream));
      REQUIRE(objects.back() != nullptr);
      REQUIRE(objects.size() < 100000);
    }
    // A large block after the second slab, so that the slab's range, freed, touches no
    // free range: its insert needs nodes of its own.
    void* const neighbour = f.instance.allocate(1 << 20, 0, stream);
    REQUIRE(neighbour != nullptr);
    // In allocation order: the first slab empties and is kept, the last free empties the
    // second, a surplus.
    for (std::size_t index = 0; index + 1 < objects.size(); ++index) f.instance.deallocate(objects[index]);
    REQUIRE(f.cache().stats().segment[pool_small].current == 2);
    const std::int64_t live_large_bytes = f.cache().stats().active_bytes[pool_large].current;
    failures_injected.store(0);
    failure_persists.store(false);  // once: the pending entry that keeps the range has room
    allocations_before_failure.store(failing);
    f.instance.deallocate(objects.back());
    disarm();
    const bool failed = failures_injected.load() > 0;
    f.check();
    CHECK(f.cache().stats().segment[pool_small].current == 1);
    const std::int64_t pending_bytes = f.cache().stats().active_bytes[pool_large].current - live_large_bytes;
    if (pending_bytes > 0) ++kept_pending;
    CHECK((pending_bytes == 0 || failed));
    void* large = f.instance.allocate(64ull << 20, 0, stream);  // scans the pending list
    REQUIRE(large != nullptr);
    CHECK(f.cache().stats().active_bytes[pool_large].current == live_large_bytes + (64ll << 20));
    f.instance.deallocate(large);
    f.instance.deallocate(neighbour);
    f.cache().release_cache(0);
    f.check();
    CHECK(f.cache().stats().reserved_bytes[pool_all].current == 0);
    if (!failed) break;
    ++points;
  }
  CHECK(points >= 1);
  CHECK(points < 64);
  CHECK(kept_pending >= 1);  // some failure struck the large pool's insert
}

namespace {

// Whether two live blocks share a byte: the safety a cache keeps whatever else fails.
bool overlaps_any(const std::vector<std::pair<void*, std::size_t>>& live, void* block, std::size_t size_bytes) {
  const auto begin = reinterpret_cast<std::uintptr_t>(block);
  for (const auto& [other, other_size] : live) {
    const auto other_begin = reinterpret_cast<std::uintptr_t>(other);
    if (begin < other_begin + other_size && other_begin < begin + size_bytes) return true;
  }
  return false;
}

// Which operations fail, and how.
enum class failing {
  allocations,      // every allocation and record_stream, once or from then on
  everything_once,  // every kind of operation, frees and cache releases too, once
  everything,       // one operation in four of every kind, once or from then on
};

// Random operations with a host allocation failing: one of the operation's first eight,
// once or from then on (until the operation ends). Where only allocations and
// record_stream fail, they must leave the cache exactly as it was when they throw; where
// every kind fails once, a free or release delays what it cannot do, a later operation
// finishing it (Note [Pending without host memory]) -- both checked in full after every
// operation, and everything given back at the end. A failure that persists through a free
// may leave its block unavailable for good (no room even for the pending entry): then the
// check is that nothing crashes, no two live blocks overlap, and everything made is given
// back at teardown.
void run_with_failures(bool vmm, std::size_t exact_start_allocations, failing mode) {
  const bool frees_fail = mode != failing::allocations;
  const bool strict = mode != failing::everything;
  core::cache_settings settings = core::cache_settings::for_backend(vmm);
  settings.exact_start_allocations = exact_start_allocations;
  {
    fragless::testing::fake_fixture f(2ull << 30, settings);
    std::mt19937_64 random(vmm ? 11 : 12);
    std::vector<std::pair<void*, std::size_t>> live;
    std::size_t live_bytes = 0;
    long injected = 0, allocations_failed = 0;
    // Without the walk after each operation the free-failing runs are cheap: four times as
    // many, so that even a sanitizer build's quarter (Note [Sanitizer scale]) injects plenty.
    const int operations = fragless::testing::test_operations(strict ? 4000 : 16000);
    for (int step = 0; step < operations; ++step) {
      // Allocations seldom need host memory (kept nodes, slabs): each operation is armed,
      // but for one in four where failures may persist through frees.
      const bool armed = mode != failing::everything || random() % 4 == 0;
      const bool persists = random() % 4 == 0 && mode != failing::everything_once;
      const long failing = static_cast<long>(random() % 8);
      const auto arm = [&] {
        failures_injected.store(0);
        if (!armed) return;
        failure_persists.store(persists);
        allocations_before_failure.store(failing);
      };
      const auto choice = random() % 100;
      void* const stream = stream_number(1 + random() % 3);
      failures_injected.store(0);
      if ((choice < 50 && live_bytes < (1ull << 30)) || live.empty()) {
        std::size_t size = 0;
        switch (random() % 3) {
          case 0: size = 1 + random() % 4096; break;
          case 1: size = 1 + random() % (1 << 20); break;
          default: size = (1 + random() % 24) << 20; break;
        }
        void* block = nullptr;
        try {
          arm();
          block = f.instance.allocate(size, 0, stream);
          disarm();
        } catch (const std::bad_alloc&) {
          disarm();
          ++allocations_failed;  // the caller is told; nothing of it stays
        } catch (const std::exception&) {
          disarm();
          ++allocations_failed;  // out of device memory: the fake's capacity
        }
        if (block != nullptr) {
          CHECK_FALSE(overlaps_any(live, block, size));
          live.emplace_back(block, size);
          live_bytes += size;
        }
      } else if (choice < 85) {
        const std::size_t at = random() % live.size();
        live_bytes -= live[at].second;
        if (frees_fail) arm();
        f.instance.deallocate(live[at].first);  // frees never throw
        disarm();
        live[at] = live.back();
        live.pop_back();
      } else if (choice < 95) {
        try {
          arm();
          f.instance.record_stream(live[random() % live.size()].first, stream_number(1 + random() % 4));
          disarm();
        } catch (const std::bad_alloc&) {
          disarm();
        }
      } else if (choice < 99) {
        f.device_backend->events_complete = !f.device_backend->events_complete;
      } else {
        if (frees_fail) arm();
        f.cache().release_cache(0);
        disarm();
      }
      injected += failures_injected.load();
      if (strict) {
        INFO("operation " << step << " (choice " << choice << "), failures injected " << failures_injected.load());
        f.check();
      }
    }
    INFO("failures injected " << injected << ", allocations failed " << allocations_failed);
    CHECK(injected >= 20);
    for (auto& [block, size] : live) f.instance.deallocate(block);
    f.device_backend->events_complete = true;
    f.cache().release_cache(0);
    if (strict) {
      f.check();
      const device_stats stats = f.cache().stats();
      CHECK(stats.allocated_bytes[pool_all].current == 0);
      CHECK(stats.active_bytes[pool_all].current == 0);
      CHECK(stats.reserved_bytes[pool_all].current == 0);
    }
  }
  CHECK(fake_backend::last_left_over().events == 0);
  CHECK(fake_backend::last_left_over().mappings == 0);
  CHECK(fake_backend::last_left_over().handles == 0);
}

// run_with_failures in both backends, with and without an exact start (a generator each:
// called from a test case, one run per combination).
void run_in_each_configuration(failing mode) {
  const bool vmm = GENERATE(true, false);
  const std::size_t exact_start = GENERATE(std::size_t{0}, std::size_t{1024});
  INFO("vmm " << vmm << ", exact start " << exact_start);
  run_with_failures(vmm, exact_start, mode);
}

}  // namespace

TEST_CASE("a free-index insert that runs out of host memory changes nothing", "[host-memory]") {
  // Ranges apart from each other, so that each insert adds a range: a node in each of the
  // index's two trees (by address, by size), which must agree whatever fails. The k-th
  // allocation of the sequence fails, for k = 0..7: each of the two nodes of four inserts.
  constexpr std::uintptr_t base = std::uintptr_t{1} << 40;
  for (long failing = 0; failing < 8; ++failing) {
    INFO("failing allocation " << failing);
    core::free_index index;
    std::size_t inserted = 0, inserted_bytes = 0, largest = 0;
    failures_injected.store(0);
    failure_persists.store(false);
    allocations_before_failure.store(failing);
    for (std::size_t range = 0; range < 16; ++range) {
      const std::size_t size_bytes = (range % 7 + 1) << 20;
      try {
        index.insert(core::free_range{base + range * (std::uintptr_t{16} << 20), size_bytes, 0, {}});
        ++inserted;
        inserted_bytes += size_bytes;
        largest = std::max(largest, size_bytes);
      } catch (const std::bad_alloc&) {
      }
      const long left = allocations_before_failure.load();  // the count goes on past the checks
      disarm();
      REQUIRE(index.range_count() == inserted);
      REQUIRE(index.free_bytes() == inserted_bytes);
      REQUIRE(index.largest_bytes() == largest);  // read from the size tree
      std::size_t walked = 0;
      index.for_each([&](const core::free_range& each) { walked += each.size_bytes; });
      REQUIRE(walked == inserted_bytes);  // read from the address tree
      allocations_before_failure.store(left);
    }
    disarm();
    CHECK(failures_injected.load() == 1);
    CHECK(inserted == 15);
  }
}

TEST_CASE("allocations and record_stream that run out of host memory leave the cache as it was",
          "[host-memory][property]") {
  run_in_each_configuration(failing::allocations);
}

TEST_CASE("frees and releases that run out of host memory once delay what they cannot do, and lose nothing",
          "[host-memory][property]") {
  run_in_each_configuration(failing::everything_once);
}

TEST_CASE("frees that run out of host memory never crash nor hand memory out twice", "[host-memory][property]") {
  run_in_each_configuration(failing::everything);
}

TEST_CASE("a repeating loop whose host allocations fail at random never crashes", "[host-memory][property]") {
  // A training-like step repeated, so that a loop plan is recorded, laid out and followed,
  // with every other operation failing one of its first three host allocations; checked as
  // frees are (a steady step allocates no host memory, so most failures land before).
  const bool vmm = GENERATE(true, false);
  INFO("vmm " << vmm);
  {
    fragless::testing::fake_fixture f(4ull << 30, core::cache_settings::for_backend(vmm));
    std::mt19937_64 shape(7);
    std::vector<std::size_t> sizes;
    for (int block = 0; block < 60; ++block) sizes.push_back((1 + shape() % 40) << 18);
    std::mt19937_64 random(vmm ? 21 : 22);
    long injected = 0;
    for (int step = 0; step < 40; ++step) {
      std::vector<std::pair<void*, std::size_t>> live;
      const auto arm = [&] {
        if (random() % 2 != 0) return;
        failure_persists.store(random() % 4 == 0);
        allocations_before_failure.store(static_cast<long>(random() % 3));
      };
      for (std::size_t index = 0; index < sizes.size(); ++index) {
        failures_injected.store(0);
        void* block = nullptr;
        try {
          arm();
          block = f.instance.allocate(sizes[index], 0, stream_number(1));
          disarm();
        } catch (...) {
          disarm();
        }
        injected += failures_injected.load();
        if (block != nullptr) {
          CHECK_FALSE(overlaps_any(live, block, sizes[index]));
          live.emplace_back(block, sizes[index]);
        }
        if (index % 3 == 2 && !live.empty()) {  // activations freed as the step goes
          failures_injected.store(0);
          arm();
          f.instance.deallocate(live.front().first);
          disarm();
          injected += failures_injected.load();
          live.erase(live.begin());
        }
      }
      for (auto& [block, size] : live) {
        failures_injected.store(0);
        arm();
        f.instance.deallocate(block);
        disarm();
        injected += failures_injected.load();
      }
    }
    const device_stats stats = f.cache().stats();
    INFO("failures injected " << injected << ", plans " << stats.num_loop_plans << ", planned allocations "
                              << stats.num_planned_allocations);
    CHECK(injected >= 20);
    if (vmm) CHECK(stats.num_loop_plans > 0);  // loop plans are the VMM pool's
    f.cache().release_cache(0);
  }
  CHECK(fake_backend::last_left_over().mappings == 0);
  CHECK(fake_backend::last_left_over().handles == 0);
}
