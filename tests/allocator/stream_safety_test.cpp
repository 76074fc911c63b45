// Stream safety with simcuda's race oracle: blocks freed while kernels still use them and
// reused on other streams must never race; the same scenarios with the test-only
// unsafe_skip_stream_waits setting must be caught (so these tests can fail).
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>
#include <simcuda/control.h>

#include <vector>

#include "consistency.hpp"
#include "simcuda_support.hpp"

using namespace fragless;
using namespace fragless::testing;

namespace {

struct scenario_result {
  std::uint64_t races = 0;
  device_stats stats;
};

struct fixture {
  std::unique_ptr<core::allocator> instance;
  void* stream_a;
  void* stream_b;
  explicit fixture(bool skip_waits, bool use_vmm = true) {
    reset_simcuda();
    core::cache_settings settings = core::cache_settings::for_backend(use_vmm);
    settings.unsafe_skip_stream_waits = skip_waits;
    settings.exact_start_allocations = 0;  // small requests go to slabs (Note [Exact start])
    instance = make_simcuda_allocator(settings);
    stream_a = create_stream(0);
    stream_b = create_stream(0);
  }
  ~fixture() {
    simcuda_complete_all();
    instance.reset();
    destroy_stream(stream_a);
    destroy_stream(stream_b);
  }
  core::device_cache& cache() { return instance->device(0); }
};

// Freed on A while A's kernel still writes it; reallocated on B and written there.
std::uint64_t cross_stream_reuse(bool skip_waits, bool use_vmm, std::size_t size) {
  fixture f(skip_waits, use_vmm);
  void* block = f.instance->allocate(size, 0, f.stream_a);
  simcuda_launch(f.stream_a, block, size, 1);
  f.instance->deallocate(block);
  void* again = f.instance->allocate(size, 0, f.stream_b);
  CHECK(again == block);  // best fit hands the same memory to B...
  simcuda_launch(f.stream_b, again, size, 1);  // ...so B must be ordered after A
  f.instance->deallocate(again);
  check_consistency(f.cache().snapshot(), f.cache().stats());
  return simcuda_race_count();
}

// Allocated on A, used on B (record_stream), freed; reallocated on A at once.
std::uint64_t record_stream_reuse(bool skip_waits, std::size_t size) {
  fixture f(skip_waits);
  void* block = f.instance->allocate(size, 0, f.stream_a);
  simcuda_launch(f.stream_a, block, size, 1);
  simcuda_advance(f.stream_a, 1);
  simcuda_launch(f.stream_b, block, size, 1);  // B's kernel pending
  f.instance->record_stream(block, f.stream_b);
  f.instance->deallocate(block);
  void* again = f.instance->allocate(size, 0, f.stream_a);
  simcuda_launch(f.stream_a, again, size, 1);
  // Once B's kernel completed, the block is reusable (after the next allocation looks).
  simcuda_complete_all();
  f.instance->deallocate(again);
  check_consistency(f.cache().snapshot(), f.cache().stats());
  return simcuda_race_count();
}

}  // namespace

TEST_CASE("large block freed on one stream and reused on another: no race", "[streams]") {
  for (bool vmm : {true, false}) {
    INFO("vmm " << vmm);
    const std::uint64_t races = cross_stream_reuse(false, vmm, 8 << 20);
    INFO(race_report());
    CHECK(races == 0);
  }
}

TEST_CASE("the broken variant (no cross-stream wait) is caught by the oracle", "[streams][negative]") {
  for (bool vmm : {true, false}) {
    INFO("vmm " << vmm);
    CHECK(cross_stream_reuse(true, vmm, 8 << 20) > 0);
  }
}

// Note [Device guard] (cuda_backend.cpp): an event record or wait on a created stream
// leaves the current device alone, but the default-stream handle means the current
// device's stream, so there the backend must switch. Device 1's memory is freed on device
// 1's default stream while a kernel there still writes it and reused on a created stream
// of device 1, the calling thread on device 0 throughout: ordered (no race), the caller's
// device untouched; without the waits the oracle sees the race.
static std::uint64_t default_stream_of_another_device(bool skip_waits) {
  reset_simcuda();
  core::cache_settings settings = core::cache_settings::for_backend(true);
  settings.unsafe_skip_stream_waits = skip_waits;
  auto instance = make_simcuda_allocator(settings);
  void* created = create_stream(1);
  REQUIRE(created != nullptr);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  const std::size_t size = 8 << 20;
  void* block = instance->allocate(size, 1, nullptr);
  REQUIRE(cudaSetDevice(1) == cudaSuccess);
  simcuda_launch(nullptr, block, size, 1);  // on device 1's default stream
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  instance->deallocate(block);
  void* again = instance->allocate(size, 1, created);
  CHECK(again == block);
  int current = -1;
  REQUIRE(cudaGetDevice(&current) == cudaSuccess);
  CHECK(current == 0);
  simcuda_launch(created, again, size, 1);
  instance->deallocate(again);
  const std::uint64_t races = simcuda_race_count();
  simcuda_complete_all();
  instance.reset();
  destroy_stream(created);
  return races;
}

TEST_CASE("another device's default stream is waited for from a thread on device 0", "[streams][devices]") {
  if (simcuda_capacity(1) == 0) FAIL("this test needs SIMCUDA_DEVICES=2 (set by its ctest entry)");
  const std::uint64_t races = default_stream_of_another_device(false);
  INFO(race_report());
  CHECK(races == 0);
  CHECK(default_stream_of_another_device(true) > 0);
}

TEST_CASE("record_stream keeps a block from reuse until the other stream is done", "[streams]") {
  for (std::size_t size : {std::size_t{4096}, std::size_t{3} << 20}) {
    INFO("size " << size);
    const std::uint64_t races = record_stream_reuse(false, size);
    INFO(race_report());
    CHECK(races == 0);
    CHECK(record_stream_reuse(true, size) > 0);  // and ignoring record_stream races
  }
}

TEST_CASE("small objects are not handed to another stream while in use", "[streams]") {
  fixture f(false);
  void* block = f.instance->allocate(1000, 0, f.stream_a);
  simcuda_launch(f.stream_a, block, 1000, 1);
  f.instance->deallocate(block);
  void* other = f.instance->allocate(1000, 0, f.stream_b);
  CHECK(other != block);  // separate shards
  simcuda_launch(f.stream_b, other, 1000, 1);
  void* same = f.instance->allocate(1000, 0, f.stream_a);
  CHECK(same == block);  // same stream: reused at once
  simcuda_launch(f.stream_a, same, 1000, 1);
  f.instance->deallocate(other);
  f.instance->deallocate(same);
  INFO(race_report());
  CHECK(simcuda_race_count() == 0);
}

TEST_CASE("a cached page is moved only when its last users are done", "[streams][pages]") {
  fixture f(false);
  const std::size_t page = 2 << 20;
  // X: two whole pages; Y keeps X's range from merging with the rest of the range.
  void* x = f.instance->allocate(2 * page, 0, f.stream_a);
  void* y = f.instance->allocate(page, 0, f.stream_a);
  simcuda_launch(f.stream_a, x, 2 * page, 1);
  f.instance->deallocate(x);  // X's pages are cached, A's kernel still writes them
  const device_stats before = f.cache().stats();
  // Needs 4 new pages beyond Y: X's pages must not move while A's kernel is pending.
  void* z = f.instance->allocate(4 * page, 0, f.stream_b);
  simcuda_launch(f.stream_b, z, 4 * page, 1);
  const device_stats during = f.cache().stats();
  CHECK(during.num_unmap == before.num_unmap);
  CHECK(during.reserved_bytes[pool_all].current == before.reserved_bytes[pool_all].current + 4 * static_cast<std::int64_t>(page));
  // Once A is idle, growth moves X's pages instead of creating new ones: W does not fit
  // in X's 2-page hole, so it goes past Z and needs 3 pages: 2 moved, 1 created. The
  // moved pages' old mapping stays until that address is needed (Note [Dormant mappings]).
  simcuda_complete_all();
  void* w = f.instance->allocate(3 * page, 0, f.stream_b);
  const device_stats after = f.cache().stats();
  CHECK(after.num_page_moves == during.num_page_moves + 2);
  CHECK(after.num_unmap == during.num_unmap);
  CHECK(after.num_device_alloc == during.num_device_alloc + 1);
  CHECK(after.reserved_bytes[pool_all].current ==
        during.reserved_bytes[pool_all].current + static_cast<std::int64_t>(page));
  simcuda_launch(f.stream_b, w, 3 * page, 1);
  for (void* block : {y, z, w}) f.instance->deallocate(block);
  check_consistency(f.cache().snapshot(), f.cache().stats());
  INFO(race_report());
  CHECK(simcuda_race_count() == 0);
}

TEST_CASE("empty_cache synchronizes once and releases every unused page", "[streams][empty_cache]") {
  fixture f(false);
  const std::uint64_t used_before = simcuda_used_bytes(0);
  void* block = f.instance->allocate(6 << 20, 0, f.stream_a);
  void* small = f.instance->allocate(700, 0, f.stream_b);
  simcuda_launch(f.stream_a, block, 6 << 20, 1);
  f.instance->deallocate(block);
  const device_stats before = f.cache().stats();
  const std::size_t released = f.cache().release_cache(0);
  const device_stats after = f.cache().stats();
  CHECK(after.num_sync_all_streams == before.num_sync_all_streams + 1);
  CHECK(released >= (6u << 20));
  CHECK(simcuda_race_count() == 0);  // the sync completed A's kernel before the unmap
  f.instance->deallocate(small);
  f.cache().release_cache(0);
  CHECK(simcuda_used_bytes(0) == used_before);
  CHECK(f.cache().stats().reserved_bytes[pool_all].current == 0);
}

TEST_CASE("release_threshold_bytes releases memory only once no kernel can touch it", "[streams][options]") {
  for (bool vmm : {true, false}) {
    INFO("vmm " << vmm);
    reset_simcuda();
    const std::uint64_t used_before = simcuda_used_bytes(0);
    core::cache_settings settings = core::cache_settings::for_backend(vmm);
    settings.conf.release_threshold_bytes = 0;
    auto instance = make_simcuda_allocator(settings);
    void* stream_a = create_stream(0);
    const std::size_t size = 40u << 20;
    void* block = instance->allocate(size, 0, stream_a);
    const std::uint64_t used_with_block = simcuda_used_bytes(0);
    simcuda_launch(stream_a, block, size, 1);  // still running when freed
    instance->deallocate(block);
    CHECK(simcuda_used_bytes(0) == used_with_block);  // kept: a kernel may still touch it
    simcuda_complete_all();
    void* next = instance->allocate(1u << 20, 0, stream_a);  // a slow-path point
    instance->deallocate(next);
    CHECK(simcuda_used_bytes(0) == used_before);  // released now, without synchronizing
    CHECK(instance->device(0).stats().num_sync_all_streams == 0);
    INFO(race_report());
    CHECK(simcuda_race_count() == 0);
    check_consistency(instance->device(0).snapshot(), instance->device(0).stats());
    instance.reset();
    destroy_stream(stream_a);
  }
}

// Note [Retired streams]: a block freed on A while A's kernel still writes it; A is
// destroyed (its kernel still pending: simcuda keeps it, Note [Destroyed streams]) and the
// next stream created receives A's handle. Allocating there must wait for A's kernel.
namespace {

// A new stream with the handle of a destroyed one (the allocator of simcuda's stream
// objects hands the address back; a few tries cover an interleaved allocation). The other
// streams created on the way go to `others`. nullptr when none got it.
void* create_stream_with_handle(void* handle, std::vector<void*>* others) {
  for (int attempt = 0; attempt < 16; ++attempt) {
    void* created = create_stream(0);
    if (created == handle) return created;
    others->push_back(created);
  }
  return nullptr;
}

std::uint64_t reuse_after_destroy(bool retire, std::size_t size) {
  fixture f(false);
  void* dying = create_stream(0);
  void* block = f.instance->allocate(size, 0, dying);
  simcuda_launch(dying, block, size, 1);
  f.instance->deallocate(block);
  if (retire) f.instance->retire_stream(dying);
  destroy_stream(dying);
  CHECK(simcuda_pending(reinterpret_cast<void*>(-1)) >= 1);  // the kernel is still running
  std::vector<void*> others;
  void* same = create_stream_with_handle(dying, &others);
  REQUIRE(same != nullptr);
  void* again = f.instance->allocate(size, 0, same);
  if (!retire) CHECK(again == block);  // the same memory, with no wait: the race below
  simcuda_launch(same, again, size, 1);
  f.instance->deallocate(again);
  const std::uint64_t races = simcuda_race_count();
  simcuda_complete_all();
  f.instance->retire_stream(same);
  destroy_stream(same);
  for (void* other : others) destroy_stream(other);
  check_consistency(f.cache().snapshot(), f.cache().stats());
  return races;
}

}  // namespace

TEST_CASE("a destroyed stream's memory is not inherited by a new stream with its handle", "[streams][retire]") {
  for (std::size_t size : {std::size_t{4096}, std::size_t{3} << 20}) {
    INFO("size " << size);
    CHECK(reuse_after_destroy(true, size) == 0);
  }
}

TEST_CASE("without retirement the reuse races (the test can fail)", "[streams][retire][negative]") {
  CHECK(reuse_after_destroy(false, 4096) > 0);
  CHECK(reuse_after_destroy(false, std::size_t{3} << 20) > 0);
}

namespace {

constexpr std::size_t big = 8 << 20;
constexpr std::size_t middle = 6 << 20;

// Four blocks on A, in address order: X and Y (`big`) freed with A's kernels still
// writing them; the separator (`middle`) between them and the tail after Y stay live.
struct blocks_on_a {
  void* x;
  void* separator;
  void* y;
  void* tail;
};

blocks_on_a free_two_on_a(fixture& f) {
  blocks_on_a blocks{f.instance->allocate(big, 0, f.stream_a), f.instance->allocate(middle, 0, f.stream_a),
                     f.instance->allocate(big, 0, f.stream_a), f.instance->allocate(big, 0, f.stream_a)};
  for (void* block : {blocks.x, blocks.y}) {
    simcuda_launch(f.stream_a, block, big, 1);
    f.instance->deallocate(block);
  }
  return blocks;
}

}  // namespace

// Note [Standing waits]: once B waited on A, A's earlier frees are reusable on B with no
// new wait; a free A makes after that wait needs a new one (else B's kernel races A's).
TEST_CASE("a standing wait covers earlier frees and only those", "[streams][standing]") {
  for (bool vmm : {true, false}) {
    INFO("vmm " << vmm);
    fixture f(false, vmm);
    const auto [x, separator, y, tail] = free_two_on_a(f);
    const device_stats before = f.cache().stats();
    void* first = f.instance->allocate(big, 0, f.stream_b);  // X or Y: waits on A
    simcuda_launch(f.stream_b, first, big, 1);
    const device_stats after_first = f.cache().stats();
    CHECK(after_first.num_cross_stream_waits == before.num_cross_stream_waits + 1);
    void* second = f.instance->allocate(big, 0, f.stream_b);  // the other: freed before that wait
    simcuda_launch(f.stream_b, second, big, 1);
    CHECK(((first == x && second == y) || (first == y && second == x)));
    const device_stats after_second = f.cache().stats();
    CHECK(after_second.num_cross_stream_waits == after_first.num_cross_stream_waits);
    CHECK(after_second.num_standing_waits == after_first.num_standing_waits + 1);
    // A frees after B's wait, with its kernel still pending: B must wait again.
    simcuda_launch(f.stream_a, separator, middle, 1);
    f.instance->deallocate(separator);
    void* third = f.instance->allocate(middle, 0, f.stream_b);
    CHECK(third == separator);
    simcuda_launch(f.stream_b, third, middle, 1);
    CHECK(f.cache().stats().num_cross_stream_waits == after_second.num_cross_stream_waits + 1);
    INFO(race_report());
    CHECK(simcuda_race_count() == 0);
    for (void* block : {first, second, third, tail}) f.instance->deallocate(block);
    check_consistency(f.cache().snapshot(), f.cache().stats());
  }
}

// Note [Shared records]: an event recorded on A for B's wait serves C's wait for a free A
// made before it, with no second record; a free A makes after it needs a new record.
TEST_CASE("an event recorded for one stream's wait serves another's", "[streams][standing]") {
  fixture f(false);
  void* stream_c = create_stream(0);
  const auto [x, separator, y, tail] = free_two_on_a(f);
  const std::uint64_t records_before = simcuda_call_count("cudaEventRecord");
  const std::uint64_t waits_before = simcuda_call_count("cudaStreamWaitEvent");
  const device_stats stats_before = f.cache().stats();
  void* on_b = f.instance->allocate(big, 0, f.stream_b);  // X or Y: A's kernel pending
  simcuda_launch(f.stream_b, on_b, big, 1);
  CHECK(simcuda_call_count("cudaEventRecord") == records_before + 1);
  void* on_c = f.instance->allocate(big, 0, stream_c);  // the other: freed before that record
  simcuda_launch(stream_c, on_c, big, 1);
  CHECK(((on_b == x && on_c == y) || (on_b == y && on_c == x)));
  CHECK(simcuda_call_count("cudaEventRecord") == records_before + 1);  // shared
  CHECK(simcuda_call_count("cudaStreamWaitEvent") == waits_before + 2);
  // A frees after that record, its kernel pending: C needs an event recorded after it.
  simcuda_launch(f.stream_a, separator, middle, 1);
  f.instance->deallocate(separator);
  void* third = f.instance->allocate(middle, 0, stream_c);
  CHECK(third == separator);
  simcuda_launch(stream_c, third, middle, 1);
  CHECK(simcuda_call_count("cudaEventRecord") == records_before + 2);
  const device_stats stats_after = f.cache().stats();
  CHECK(stats_after.num_stream_order_records == stats_before.num_stream_order_records + 2);
  CHECK(stats_after.num_cross_stream_waits == stats_before.num_cross_stream_waits + 3);
  INFO(race_report());
  CHECK(simcuda_race_count() == 0);
  simcuda_complete_all();
  for (void* block : {on_b, on_c, third, tail}) f.instance->deallocate(block);
  check_consistency(f.cache().snapshot(), f.cache().stats());
  f.instance->retire_stream(stream_c);
  destroy_stream(stream_c);
}

// A retired stream's standing waits go with it: a new stream with its handle has waited on
// nothing, so memory A freed before the old stream's wait still needs a wait for it.
TEST_CASE("a new stream does not inherit a retired stream's standing waits", "[streams][standing][retire]") {
  fixture f(false);
  void* x = f.instance->allocate(big, 0, f.stream_a);
  void* separator = f.instance->allocate(big / 2, 0, f.stream_a);
  void* y = f.instance->allocate(big, 0, f.stream_a);
  void* tail = f.instance->allocate(big / 2, 0, f.stream_a);
  for (void* block : {x, y}) {
    simcuda_launch(f.stream_a, block, big, 1);
    f.instance->deallocate(block);
  }
  void* dying = create_stream(0);
  void* first = f.instance->allocate(big, 0, dying);  // waits on A: covers both frees
  simcuda_launch(dying, first, big, 1);  // still pending as the stream goes
  f.instance->retire_stream(dying);
  destroy_stream(dying);
  std::vector<void*> others;
  void* same = create_stream_with_handle(dying, &others);
  REQUIRE(same != nullptr);
  const device_stats before = f.cache().stats();
  void* again = f.instance->allocate(big, 0, same);  // the other of X and Y: A's kernel pending
  CHECK(((first == x && again == y) || (first == y && again == x)));
  simcuda_launch(same, again, big, 1);
  CHECK(f.cache().stats().num_cross_stream_waits > before.num_cross_stream_waits);
  INFO(race_report());
  CHECK(simcuda_race_count() == 0);
  f.instance->deallocate(again);
  simcuda_complete_all();
  f.instance->retire_stream(same);
  destroy_stream(same);
  for (void* other : others) destroy_stream(other);
  for (void* block : {first, separator, tail}) f.instance->deallocate(block);
  check_consistency(f.cache().snapshot(), f.cache().stats());
}

namespace {

// Blocks of distinct sizes, each followed by a live separator so that no two free ranges
// merge: best fit then hands a request of a block's size exactly that block.
constexpr std::size_t size_x = 12 << 20, size_x2 = 16 << 20, size_p = 8 << 20, size_q = 10 << 20;

struct separated_blocks {
  std::vector<void*> blocks, separators;
  void* add(fixture& f, std::size_t bytes, void* stream) {
    blocks.push_back(f.instance->allocate(bytes, 0, stream));
    separators.push_back(f.instance->allocate(2 << 20, 0, stream));
    return blocks.back();
  }
  void free_on(fixture& f, void* block, std::size_t bytes, void* stream) {
    simcuda_launch(stream, block, bytes, 1);  // still writing it when it is freed
    f.instance->deallocate(block);
  }
};

}  // namespace

// Note [Transitive waits]: C waits on an event B recorded after B waited on A, so C is
// ordered after A's earlier frees too, and reuses one with no wait of its own.
TEST_CASE("a wait carries the waits made before its event was recorded", "[streams][standing]") {
  fixture f(false);
  void* stream_c = create_stream(0);
  separated_blocks on;
  void* x = on.add(f, size_x, f.stream_a);
  void* x2 = on.add(f, size_x2, f.stream_a);
  void* p = on.add(f, size_p, f.stream_b);
  on.free_on(f, x, size_x, f.stream_a);
  on.free_on(f, x2, size_x2, f.stream_a);
  void* on_b = f.instance->allocate(size_x, 0, f.stream_b);  // X: B waits on A
  CHECK(on_b == x);
  simcuda_launch(f.stream_b, on_b, size_x, 1);
  on.free_on(f, p, size_p, f.stream_b);
  void* on_c = f.instance->allocate(size_p, 0, stream_c);  // P: C waits on B, and so on A
  CHECK(on_c == p);
  simcuda_launch(stream_c, on_c, size_p, 1);
  const std::uint64_t waits_before = simcuda_call_count("cudaStreamWaitEvent");
  const std::uint64_t records_before = simcuda_call_count("cudaEventRecord");
  void* again = f.instance->allocate(size_x2, 0, stream_c);  // X2: A freed it before B's wait
  CHECK(again == x2);
  simcuda_launch(stream_c, again, size_x2, 1);
  CHECK(simcuda_call_count("cudaStreamWaitEvent") == waits_before);
  CHECK(simcuda_call_count("cudaEventRecord") == records_before);
  INFO(race_report());
  CHECK(simcuda_race_count() == 0);
  simcuda_complete_all();
  for (void* block : {on_b, on_c, again}) f.instance->deallocate(block);
  for (void* block : on.separators) f.instance->deallocate(block);
  check_consistency(f.cache().snapshot(), f.cache().stats());
  f.instance->retire_stream(stream_c);
  destroy_stream(stream_c);
}

// Only the waits made before the record: C waits on an event B recorded (for D) before B
// waited on A, so A's free is not covered for C, which must wait for it (else C's kernel
// races A's, which the oracle would report).
TEST_CASE("a wait made after an event's record is not carried by it", "[streams][standing]") {
  fixture f(false);
  void* stream_c = create_stream(0);
  void* stream_d = create_stream(0);
  separated_blocks on;
  void* p = on.add(f, size_p, f.stream_b);
  void* q = on.add(f, size_q, f.stream_b);
  void* x = on.add(f, size_x, f.stream_a);
  void* x2 = on.add(f, size_x2, f.stream_a);
  on.free_on(f, p, size_p, f.stream_b);
  on.free_on(f, q, size_q, f.stream_b);
  on.free_on(f, x, size_x, f.stream_a);
  on.free_on(f, x2, size_x2, f.stream_a);
  void* on_d = f.instance->allocate(size_p, 0, stream_d);  // P: an event recorded on B, before...
  CHECK(on_d == p);
  simcuda_launch(stream_d, on_d, size_p, 1);
  void* on_b = f.instance->allocate(size_x, 0, f.stream_b);  // ...B waits on A (X)
  CHECK(on_b == x);
  simcuda_launch(f.stream_b, on_b, size_x, 1);
  void* on_c = f.instance->allocate(size_q, 0, stream_c);  // Q: C waits on B's earlier event
  CHECK(on_c == q);
  simcuda_launch(stream_c, on_c, size_q, 1);
  const std::uint64_t waits_before = simcuda_call_count("cudaStreamWaitEvent");
  void* again = f.instance->allocate(size_x2, 0, stream_c);  // X2: C must wait on A itself
  CHECK(again == x2);
  simcuda_launch(stream_c, again, size_x2, 1);
  CHECK(simcuda_call_count("cudaStreamWaitEvent") == waits_before + 1);
  INFO(race_report());
  CHECK(simcuda_race_count() == 0);
  simcuda_complete_all();
  for (void* block : {on_d, on_b, on_c, again}) f.instance->deallocate(block);
  for (void* block : on.separators) f.instance->deallocate(block);
  check_consistency(f.cache().snapshot(), f.cache().stats());
  for (void* stream : {stream_c, stream_d}) {
    f.instance->retire_stream(stream);
    destroy_stream(stream);
  }
}

// Note [Pending in stream order]: a scan of the pending frees asks about no event recorded on
// a stream after one found not complete, and frees every entry whose events completed.
TEST_CASE("a scan of pending frees stops asking a stream at its first busy event", "[streams][pending]") {
  fixture f(false);
  constexpr std::size_t size = 8u << 20;
  constexpr int frees = 20;
  std::vector<void*> blocks;
  for (int index = 0; index < frees; ++index) blocks.push_back(f.instance->allocate(size, 0, f.stream_a));
  simcuda_complete_all();
  for (void* block : blocks) {
    simcuda_launch(f.stream_b, block, size, 0);  // B reads it...
    f.instance->record_stream(block, f.stream_b);
    f.instance->deallocate(block);  // ...and the free's event on B follows that read
  }
  const auto pending_frees = [&] {
    int count = 0;
    for (const auto& segment : f.cache().snapshot().segments)
      for (const auto& block : segment.blocks) count += block.state == block_state::pending_free;
    return count;
  };
  CHECK(pending_frees() == frees);
  std::vector<void*> probes;
  simcuda_reset_counters();
  probes.push_back(f.instance->allocate(size, 0, f.stream_a));
  CHECK(simcuda_call_count("cudaEventQuery") == 1);  // the first event is B's, still busy
  CHECK(pending_frees() == frees);
  CHECK(simcuda_advance(f.stream_b, 5) == 5);  // the first five reads done
  simcuda_reset_counters();
  probes.push_back(f.instance->allocate(size, 0, f.stream_a));
  CHECK(simcuda_call_count("cudaEventQuery") == 6);  // five complete, then the busy sixth
  CHECK(pending_frees() == frees - 5);
  simcuda_complete_all();
  simcuda_reset_counters();
  probes.push_back(f.instance->allocate(size, 0, f.stream_a));
  CHECK(simcuda_call_count("cudaEventQuery") == frees - 5);
  CHECK(pending_frees() == 0);
  for (void* probe : probes) f.instance->deallocate(probe);
  check_consistency(f.cache().snapshot(), f.cache().stats());
  CHECK(simcuda_race_count() == 0);
}
