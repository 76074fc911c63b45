// The allocator (device_cache) driven by a fake backend: random operations with full
// consistency checks, pending frees, cross-stream waits, the OOM path and failing calls,
// in both VMM and cudaMalloc modes -- no CUDA involved.
#include <catch2/catch.hpp>

#include "fake_random_operations.hpp"

using namespace fragless;
using fragless::testing::fake_backend;
using fragless::testing::stream_number;

namespace {

constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

// The fake-backend fixture in a mode's default settings.
struct fixture : fragless::testing::fake_fixture {
  fixture(std::uint64_t capacity, bool vmm) : fake_fixture(capacity, core::cache_settings::for_backend(vmm)) {}
};

// Small requests in slabs from the first (Note [Exact start]).
core::cache_settings slab_settings(bool vmm) {
  core::cache_settings settings = core::cache_settings::for_backend(vmm);
  settings.exact_start_allocations = 0;
  return settings;
}

}  // namespace

TEST_CASE("fake backend: random operations keep stats and layout consistent", "[fake][property]") {
  const bool vmm = GENERATE(true, false);
  INFO("vmm " << vmm);
  fixture f(4 * kGiB, vmm);
  fragless::testing::random_operation_mix mix;
  mix.seed = vmm ? 1 : 2;
  mix.operations = fragless::testing::test_operations(20000);
  mix.live_limit_bytes = 2 * kGiB;
  mix.largest_mib = 40;
  mix.releases_cache = true;
  fragless::testing::run_random_operations(f, vmm, mix);
  const device_stats stats = f.cache().stats();
  CHECK(stats.allocated_bytes[pool_all].current == 0);
  CHECK(stats.reserved_bytes[pool_all].current == 0);
  CHECK(f.device_backend->used_bytes() == 0);
  CHECK(stats.num_device_alloc == stats.num_device_free);
}

TEST_CASE("fake backend: a recorded stream keeps the block pending until its event completes", "[fake]") {
  fixture f(kGiB, true);
  void* s1 = stream_number(1);
  void* s2 = stream_number(2);
  f.device_backend->events_complete = false;
  void* block = f.instance.allocate(8 << 20, 0, s1);
  f.instance.record_stream(block, s2);
  f.instance.deallocate(block);
  auto snap = f.cache().snapshot();
  int pending = 0;
  for (auto& segment : snap.segments)
    for (auto& b : segment.blocks) pending += b.state == block_state::pending_free;
  CHECK(pending == 1);
  f.check();
  // Not reusable while pending: a same-size request gets other memory.
  void* other = f.instance.allocate(8 << 20, 0, s1);
  CHECK(other != block);
  f.device_backend->events_complete = true;
  f.instance.deallocate(other);
  void* again = f.instance.allocate(8 << 20, 0, s1);  // processes the completed event
  f.check();
  CHECK((again == block || again == other));
  f.instance.deallocate(again);
  f.check();
}

TEST_CASE("fake backend: reuse on another stream waits on an event, same stream does not", "[fake]") {
  fixture f(kGiB, true);
  void* block = f.instance.allocate(8 << 20, 0, stream_number(1));
  f.instance.deallocate(block);
  const int waits_before = f.device_backend->waits;
  void* same = f.instance.allocate(8 << 20, 0, stream_number(1));
  CHECK(same == block);
  CHECK(f.device_backend->waits == waits_before);
  f.instance.deallocate(same);
  void* other = f.instance.allocate(8 << 20, 0, stream_number(2));
  CHECK(other == block);  // best fit reuses it...
  CHECK(f.device_backend->waits == waits_before + 1);  // ...after stream 2 waits for stream 1
  f.instance.deallocate(other);
}

TEST_CASE("fake backend: out of memory releases the cache, retries, then fails cleanly", "[fake][oom]") {
  const bool vmm = GENERATE(true, false);
  fixture f(256 << 20, vmm);
  void* a = f.instance.allocate(100 << 20, 0, stream_number(1));
  void* b = f.instance.allocate(100 << 20, 0, stream_number(1));
  f.instance.deallocate(b);  // cached
  void* c = f.instance.allocate(120 << 20, 0, stream_number(1));  // needs the cached memory back
  REQUIRE(c != nullptr);
  f.check();
  const device_stats before = f.cache().stats();
  try {
    f.instance.allocate(200 << 20, 0, stream_number(1));
    FAIL("expected out_of_memory_error");
  } catch (const out_of_memory_error& oom) {
    const std::string text = oom.what();
    CHECK(text.rfind("CUDA out of memory. Tried to allocate 200.00 MiB. GPU 0 has a total capacity of 256.00 MiB", 0) == 0);
    CHECK(text.find("reserved by fragless but unallocated") != std::string::npos);
    CHECK(text.find("largest free block") != std::string::npos);
  }
  const device_stats after = f.cache().stats();
  CHECK(after.num_ooms == before.num_ooms + 1);
  CHECK(after.num_alloc_retries == before.num_alloc_retries + 1);
  CHECK(after.num_sync_all_streams == before.num_sync_all_streams + 1);
  f.check();
  f.instance.deallocate(a);
  f.instance.deallocate(c);
  CHECK(f.cache().release_cache(0) > 0);
  CHECK(f.device_backend->used_bytes() == 0);
  // Larger than the device: refused at once.
  CHECK_THROWS_AS(f.instance.allocate(std::size_t{1} << 40, 0, nullptr), out_of_memory_error);
}

TEST_CASE("fake backend: failing device calls leave the allocator consistent", "[fake][faults]") {
  const char* call = GENERATE("create_physical", "map", "stream_wait_event", "record_event", "create_event",
                              "malloc_segment", "synchronize_device", "unmap");
  INFO(call);
  for (bool vmm : {true, false}) {
    fixture f(kGiB, vmm);
    std::vector<void*> blocks;
    for (int i = 0; i < 6; ++i) blocks.push_back(f.instance.allocate((i + 1) << 20, 0, stream_number(1 + i % 2)));
    f.instance.record_stream(blocks[0], stream_number(3));
    for (int i = 0; i < 6; i += 2) f.instance.deallocate(blocks[i]);
    f.device_backend->fail_next = call;
    std::vector<void*> more;
    for (int i = 0; i < 6; ++i) {
      try {
        more.push_back(f.instance.allocate((i + 1) << 20, 0, stream_number(2 - i % 2)));
      } catch (const device_error&) {
      }
      f.check();
    }
    f.cache().release_cache(0);
    f.check();
    for (int i = 1; i < 6; i += 2) f.instance.deallocate(blocks[i]);
    for (void* block : more) f.instance.deallocate(block);
    f.cache().release_cache(0);
    f.cache().release_cache(0);
    f.check();
    CHECK(f.device_backend->used_bytes() == 0);
  }
}

TEST_CASE("fake backend: bad input", "[fake][bad_input]") {
  fixture f(kGiB, true);
  void* block = f.instance.allocate(1 << 20, 0, stream_number(1));
  CHECK_THROWS_AS(f.instance.deallocate(static_cast<char*>(block) + 512), invalid_pointer_error);
  CHECK_THROWS_AS(f.instance.deallocate(reinterpret_cast<void*>(0x1234)), invalid_pointer_error);
  CHECK(f.instance.allocate(0, 0, stream_number(1)) == nullptr);
  CHECK_THROWS_AS(f.instance.allocate(1024, 7, nullptr), invalid_argument_error);
  // A device-1 stream used on device 0.
  CHECK_THROWS_AS(f.instance.allocate(1024, 0, reinterpret_cast<void*>(std::uintptr_t{1} << 63 | 5)),
                  invalid_argument_error);
  f.instance.deallocate(block);
  CHECK_THROWS_AS(f.instance.deallocate(block), invalid_pointer_error);
  f.check();
}

TEST_CASE("fake backend: a slab emptied by a pending free during empty_cache is returned once", "[fake][slabs]") {
  fixture f(kGiB, true);
  void* s1 = stream_number(1);
  std::vector<void*> objects;
  for (int i = 0; i < 129; ++i) objects.push_back(f.instance.allocate(512, 0, s1));  // 128 per slab: two slabs
  f.device_backend->events_complete = false;
  f.instance.record_stream(objects[128], stream_number(2));
  for (int i = 0; i < 128; ++i) f.instance.deallocate(objects[i]);  // first slab empty (kept as cache)
  f.instance.deallocate(objects[128]);                                // second slab's last object: pending
  f.check();
  f.device_backend->events_complete = true;
  CHECK(f.cache().release_cache(0) > 0);  // the pending free empties slab 2 while slab 1 is the cached one
  f.check();
  const device_stats stats = f.cache().stats();
  CHECK(stats.segment[pool_small].current == 0);
  CHECK(stats.reserved_bytes[pool_all].current == 0);
  CHECK(f.device_backend->used_bytes() == 0);
}

// Note [Synchronized settle]: the small pool's hot path runs without the device lock, so
// another thread can free small objects between the device synchronization of empty_cache
// and the settling that follows it. What it frees then was not covered by the
// synchronization: its slab must not be released as idle, nor a pending object completed.
// empty_cache, with `object` freed on the hot path inside its synchronization, and work
// queued after it (no event completes) on the streams that used the object.
namespace {
void empty_cache_freeing_during_synchronization(fragless::testing::fake_fixture& f, void* object) {
  f.device_backend->on_next_synchronize = [&f, object] {
    f.device_backend->events_complete = false;
    f.instance.deallocate(object);
  };
  f.cache().release_cache(0);
}
}  // namespace

TEST_CASE("fake backend: a slab emptied after empty_cache synchronized keeps its stream", "[fake][slabs][sync]") {
  const bool vmm = GENERATE(true, false);
  INFO("vmm " << vmm);
  fragless::testing::fake_fixture f(kGiB, slab_settings(vmm));
  void* object = f.instance.allocate(512, 0, stream_number(1));  // its kernel runs on stream 1
  empty_cache_freeing_during_synchronization(f, object);          // the slab is empty now
  f.check();
  // The slab's page stays: stream 1 may still touch it.
  CHECK(f.cache().stats().reserved_bytes[pool_all].current > 0);
  CHECK(f.device_backend->used_bytes() > 0);
  f.device_backend->events_complete = true;
  f.cache().release_cache(0);
  f.check();
  CHECK(f.cache().stats().reserved_bytes[pool_all].current == 0);
  CHECK(f.device_backend->used_bytes() == 0);
}

TEST_CASE("fake backend: an object freed pending after empty_cache synchronized stays pending", "[fake][slabs][sync]") {
  const bool vmm = GENERATE(true, false);
  INFO("vmm " << vmm);
  fragless::testing::fake_fixture f(kGiB, slab_settings(vmm));
  void* s1 = stream_number(1);
  void* object = f.instance.allocate(512, 0, s1);
  f.instance.record_stream(object, stream_number(2));
  empty_cache_freeing_during_synchronization(f, object);  // pending on stream 2's event
  f.check();
  CHECK(f.cache().stats().active_bytes[pool_all].current == 512);  // still pending
  void* next = f.instance.allocate(512, 0, s1);
  CHECK(next != object);  // not handed out again while s2 may use it
  f.instance.deallocate(next);
  f.device_backend->events_complete = true;
  f.cache().release_cache(0);
  f.check();
  CHECK(f.cache().stats().active_bytes[pool_all].current == 0);
  CHECK(f.cache().stats().reserved_bytes[pool_all].current == 0);
  CHECK(f.device_backend->used_bytes() == 0);
}

// Note [Placement]: with the new pages tied, a block goes next to a live block of its own
// size (on the side where exactly one borders its free range), else to the range's start.
TEST_CASE("fake backend: a tied placement goes next to a block of the same size", "[fake][placement]") {
  fixture f(8 * kGiB, true);
  constexpr std::size_t kKiB = 1024;
  auto at = [](void* pointer) { return reinterpret_cast<std::uintptr_t>(pointer); };
  void* left = f.instance.allocate(1024 * kKiB, 0, nullptr);   // [0, 1) MiB
  void* hole = f.instance.allocate(3072 * kKiB, 0, nullptr);   // [1, 4) MiB
  void* right = f.instance.allocate(512 * kKiB, 0, nullptr);   // [4, 4.5) MiB
  REQUIRE(at(hole) == at(left) + 1024 * kKiB);
  REQUIRE(at(right) == at(hole) + 3072 * kKiB);
  f.instance.deallocate(hole);  // free range [1, 4) MiB on mapped pages, bordered by 1 MiB | 512 KiB
  SECTION("the same size borders the end: placed at the end") {
    void* block = f.instance.allocate(512 * kKiB, 0, nullptr);
    CHECK(at(block) == at(right) - 512 * kKiB);
    f.instance.deallocate(block);
  }
  SECTION("the same size borders the start: placed at the start") {
    void* block = f.instance.allocate(1024 * kKiB, 0, nullptr);
    CHECK(at(block) == at(left) + 1024 * kKiB);
    f.instance.deallocate(block);
  }
  SECTION("no neighbour of its size: placed at the start") {
    void* block = f.instance.allocate(768 * kKiB, 0, nullptr);
    CHECK(at(block) == at(left) + 1024 * kKiB);
    f.instance.deallocate(block);
  }
  f.check();
  f.instance.deallocate(left);
  f.instance.deallocate(right);
  f.check();
}
