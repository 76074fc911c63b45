// Compaction and stitching on simcuda (docs/compaction.md, Note [Compaction],
// Note [Stitching]): live data survives passes and stitches under multi-stream traffic with the
// race oracle watching; after compact() reserved memory is exactly the pages live blocks
// touch plus a bounded cache, on random workloads and on a real trace; a request larger
// than any free range succeeds by stitching or fails with PyTorch's OOM text; the
// cudaMalloc backend releases whole segments only (automatic passes:
// automatic_compaction_test.cpp).
#include <catch2/catch.hpp>

#include <simcuda/control.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "consistency.hpp"
#include "core/vmm_pool.hpp"
#include "simcuda_support.hpp"

using namespace fragless;
using namespace fragless::testing;

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kPage = 2 * kMiB;

struct live_entry {
  std::size_t size_bytes;
  void* stream;
  std::uint64_t seed;
};

// Bytes of the distinct pages touched by memory that must stay mapped: every allocated or
// pending block of the large pool, every slab (small-pool segment).
std::size_t live_page_bytes(const memory_snapshot& snap) {
  std::set<std::uint64_t> pages;
  auto touch = [&](std::uint64_t address, std::uint64_t bytes) {
    for (std::uint64_t page = address / kPage; page <= (address + bytes - 1) / kPage; ++page) pages.insert(page);
  };
  for (const snapshot_segment& segment : snap.segments) {
    if (segment.pool == pool_small) {
      touch(segment.address, segment.size_bytes);
      continue;
    }
    for (const snapshot_block& block : segment.blocks)
      if (block.state != block_state::free) touch(block.address, block.size_bytes);
  }
  return pages.size() * kPage;
}

void check_reserved_after_compact(core::device_cache& cache) {
  const device_stats stats = cache.stats();
  const memory_snapshot snap = cache.snapshot();
  check_consistency(snap, stats);
  const auto reserved = static_cast<std::size_t>(stats.reserved_bytes[pool_all].current);
  const std::size_t live_pages = live_page_bytes(snap);
  INFO("reserved " << reserved << " live pages " << live_pages);
  CHECK(reserved >= live_pages);
  CHECK(reserved <= live_pages + core::kCachedPagesKept * kPage);
}

std::string oom_text_of(core::allocator& instance, std::size_t bytes) {
  try {
    void* block = instance.allocate(bytes, 0, nullptr);
    instance.deallocate(block);
  } catch (const out_of_memory_error& oom) {
    return oom.what();
  }
  return "";
}

}  // namespace

TEST_CASE("live data survives compaction, page moves and stitching under multi-stream traffic", "[compaction]") {
  reset_simcuda();
  REQUIRE(simcuda_set_capacity(0, 160 * kMiB) == 0);
  core::cache_settings settings;
  settings.virtual_range_factor = 1.0;  // a range no larger than the device: stitching happens
  auto instance = make_simcuda_allocator(settings);
  core::device_cache& cache = instance->device(0);
  std::vector<void*> streams = {nullptr, create_stream(0), create_stream(0)};
  std::mt19937_64 random(7);
  std::map<void*, live_entry> live;
  std::uint64_t next_seed = 1;
  int out_of_memory = 0;
  auto verify_all = [&] {
    for (const auto& [block, entry] : live) {
      INFO("block " << block << " of " << entry.size_bytes << " bytes");
      REQUIRE(check_pattern(block, entry.size_bytes, entry.seed));
    }
  };
  const long operations = operations_from_env(20000);
  for (long step = 0; step < operations; ++step) {
    const auto choice = random() % 100;
    void* stream = streams[random() % streams.size()];
    if (choice < 50 || live.empty()) {
      std::size_t bytes = 0;
      const auto size_kind = random() % 10;
      if (size_kind < 4) bytes = 512 + random() % (64 * 1024);
      else if (size_kind < 9) bytes = 64 * 1024 + random() % (6 * kMiB);
      else bytes = 8 * kMiB + random() % (24 * kMiB);
      void* block = nullptr;
      try {
        block = instance->allocate(bytes, 0, stream);
      } catch (const out_of_memory_error& oom) {
        ++out_of_memory;
        REQUIRE(std::string(oom.what()).rfind("CUDA out of memory. Tried to allocate ", 0) == 0);
        continue;
      }
      const std::uint64_t seed = next_seed++;
      fill_pattern(block, bytes, seed);
      simcuda_launch(stream, block, bytes, 1);
      live[block] = live_entry{bytes, stream, seed};
    } else if (choice < 90) {
      auto at = live.begin();
      std::advance(at, static_cast<long>(random() % live.size()));
      if (random() % 4 == 0) {
        void* other = streams[random() % streams.size()];
        order_streams(other, at->second.stream);  // the other stream reads after the writes
        instance->record_stream(at->first, other);
        simcuda_launch(other, at->first, at->second.size_bytes, 0);
      }
      REQUIRE(check_pattern(at->first, at->second.size_bytes, at->second.seed));
      instance->deallocate(at->first);
      live.erase(at);
    } else if (choice < 95) {
      simcuda_advance(streams[random() % streams.size()], 1 + random() % 4);
    } else {
      cache.compact();
      verify_all();
    }
  }
  verify_all();
  simcuda_complete_all();
  cache.compact();
  verify_all();
  const device_stats stats = cache.stats();
  CHECK(stats.num_page_moves > 0);
  CHECK(stats.compaction_released_bytes > 0);
  CHECK(stats.num_compactions > 0);
  CHECK(stats.num_stitched_allocations > 0);
  CHECK(stats.reserved_bytes[pool_all].peak <= static_cast<std::int64_t>(160 * kMiB));
  INFO(out_of_memory << " allocations ran out of memory");
  INFO("traffic: moves " << stats.num_page_moves << " stitched " << stats.num_stitched_allocations << " compactions " << stats.num_compactions << " released " << stats.compaction_released_bytes << " ooms " << out_of_memory << " live " << live.size());
  check_reserved_after_compact(cache);
  for (const auto& [block, entry] : live) instance->deallocate(block);
  simcuda_complete_all();
  INFO(race_report());
  CHECK(simcuda_race_count() == 0);
  for (void* stream : streams)
    if (stream != nullptr) destroy_stream(stream);
  REQUIRE(simcuda_set_capacity(0, std::uint64_t{80} << 30) == 0);
}

TEST_CASE("after compact() reserved is the pages live blocks touch plus at most the kept pages", "[compaction]") {
  reset_simcuda();
  // Page granularity: with physical chunks a partly live chunk stays (chunks_test.cpp).
  core::cache_settings settings;
  settings.conf.physical_chunk_fraction = 0.0;
  auto instance = make_simcuda_allocator(settings);
  core::device_cache& cache = instance->device(0);
  std::mt19937_64 random(11);
  std::vector<std::pair<void*, std::size_t>> live;
  for (int round = 0; round < 6; ++round) {
    for (int i = 0; i < 400; ++i) {
      const std::size_t bytes = random() % 3 == 0 ? 512 + random() % 60000 : 100000 + random() % (12 * kMiB);
      live.emplace_back(instance->allocate(bytes, 0, nullptr), bytes);
    }
    std::shuffle(live.begin(), live.end(), random);
    for (std::size_t keep = live.size() / 4; live.size() > keep;) {
      instance->deallocate(live.back().first);
      live.pop_back();
    }
    const compact_result result = cache.compact();
    INFO("round " << round << ": released " << result.released_bytes);
    CHECK(result.unmapped_pages > 0);
    check_reserved_after_compact(cache);
    for (const auto& [block, bytes] : live) REQUIRE(simcuda_is_accessible(block, bytes));
  }
  for (const auto& [block, bytes] : live) instance->deallocate(block);
}

namespace {

// Replays a buffer-lifetime trace from the shared reference set (id,lower,upper,size: every
// buffer lives from `lower` to `upper` in the trace's time), running compact() and the
// reserved-bytes check at a dozen points along it.
void replay_with_compaction(const std::string& name) {
  const std::string path = std::string(FRAGLESS_SHARED_TRACES) + "/" + name;
  std::ifstream file(path);
  INFO("the shared reference traces must sit beside the repository: " << path);
  REQUIRE(file.good());
  struct event {
    std::uint64_t time;
    bool allocate;
    std::uint64_t id;
    std::uint64_t size;
  };
  std::vector<event> events;
  std::string line;
  std::getline(file, line);  // header
  while (std::getline(file, line)) {
    std::replace(line.begin(), line.end(), ',', ' ');
    std::istringstream fields(line);
    std::uint64_t id = 0, lower = 0, upper = 0, size = 0;
    if (!(fields >> id >> lower >> upper >> size)) continue;
    events.push_back({lower, true, id, size});
    events.push_back({upper, false, id, size});
  }
  REQUIRE(events.size() > 1000);
  std::stable_sort(events.begin(), events.end(), [](const event& a, const event& b) {
    return a.time != b.time ? a.time < b.time : (!a.allocate && b.allocate);  // frees first
  });
  reset_simcuda();
  core::cache_settings settings;
  settings.conf.physical_chunk_fraction = 0.0;  // page granularity, as above
  auto instance = make_simcuda_allocator(settings);
  core::device_cache& cache = instance->device(0);
  std::map<std::uint64_t, void*> live;
  int checks = 0;
  for (std::size_t index = 0; index < events.size(); ++index) {
    const event& e = events[index];
    if (e.allocate) {
      live[e.id] = instance->allocate(e.size, 0, nullptr);
    } else if (auto at = live.find(e.id); at != live.end()) {
      instance->deallocate(at->second);
      live.erase(at);
    }
    if (index % (events.size() / 12) == 0) {
      cache.compact();
      check_reserved_after_compact(cache);
      ++checks;
    }
  }
  CHECK(checks >= 12);
  for (const auto& [id, block] : live) instance->deallocate(block);
}

}  // namespace

TEST_CASE("after compact() reserved tracks live pages along real traces", "[compaction]") {
  replay_with_compaction("cappadokes+idealloc/somas_tensors/resnet50.csv");
  replay_with_compaction("cappadokes+idealloc/somas_tensors/tiny_bert.csv");
}

TEST_CASE("a request larger than any free range is stitched from free pages, or fails as out of memory",
          "[compaction]") {
  reset_simcuda();
  REQUIRE(simcuda_set_capacity(0, 64 * kMiB) == 0);
  core::cache_settings settings;
  settings.virtual_range_factor = 1.0;  // the shared range is as large as the device
  // Each 4 MiB block on chunks of its own (Note [First growth] would back several with one
  // 20 MiB chunk, which a stitch cannot take while one of them lives).
  settings.conf.physical_chunk_first_growth_bytes = 0;
  auto instance = make_simcuda_allocator(settings);
  core::device_cache& cache = instance->device(0);
  const std::uint64_t used_start = simcuda_used_bytes(0);
  std::vector<void*> blocks;
  for (int i = 0; i < 16; ++i) {
    blocks.push_back(instance->allocate(4 * kMiB, 0, nullptr));
    fill_pattern(blocks.back(), 4 * kMiB, static_cast<std::uint64_t>(i));
  }
  for (int i = 0; i < 16; i += 2) instance->deallocate(blocks[static_cast<std::size_t>(i)]);
  const device_stats before = cache.stats();
  CHECK(before.largest_free_block_bytes == static_cast<std::int64_t>(4 * kMiB));  // scattered
  // 16 MiB fits no free range (the largest is 4 MiB) but 32 MiB of free pages exist.
  void* stitched = instance->allocate(16 * kMiB, 0, nullptr);
  REQUIRE(stitched != nullptr);
  fill_pattern(stitched, 16 * kMiB, 99);
  REQUIRE(simcuda_is_accessible(stitched, 16 * kMiB));
  const device_stats after = cache.stats();
  CHECK(after.num_stitched_allocations == before.num_stitched_allocations + 1);
  CHECK(after.reserved_bytes[pool_all].current == before.reserved_bytes[pool_all].current);  // no growth
  CHECK(simcuda_used_bytes(0) - used_start == static_cast<std::uint64_t>(after.reserved_bytes[pool_all].current));
  for (int i = 1; i < 16; i += 2) CHECK(check_pattern(blocks[static_cast<std::size_t>(i)], 4 * kMiB, static_cast<std::uint64_t>(i)));
  CHECK(check_pattern(stitched, 16 * kMiB, 99));
  check_consistency(cache.snapshot(), cache.stats());
  // 24 MiB more: 16 MiB of free pages left, the device is full: out of memory, with
  // PyTorch's text, and nothing live touched.
  const std::string text = oom_text_of(*instance, 24 * kMiB);
  CHECK(text.rfind("CUDA out of memory. Tried to allocate 24.00 MiB", 0) == 0);
  for (int i = 1; i < 16; i += 2) CHECK(check_pattern(blocks[static_cast<std::size_t>(i)], 4 * kMiB, static_cast<std::uint64_t>(i)));
  CHECK(check_pattern(stitched, 16 * kMiB, 99));
  check_consistency(cache.snapshot(), cache.stats());
  // Freed, the stitched block is reused whole; compact() then gives its pages back.
  instance->deallocate(stitched);
  void* again = instance->allocate(16 * kMiB, 0, nullptr);
  REQUIRE(simcuda_is_accessible(again, 16 * kMiB));
  instance->deallocate(again);
  const compact_result result = cache.compact();
  CHECK(result.released_bytes >= 16 * kMiB);
  check_reserved_after_compact(cache);
  for (int i = 1; i < 16; i += 2) instance->deallocate(blocks[static_cast<std::size_t>(i)]);
  cache.release_cache(0);
  CHECK(simcuda_used_bytes(0) == used_start);
  REQUIRE(simcuda_set_capacity(0, std::uint64_t{80} << 30) == 0);
}

TEST_CASE("the cudaMalloc backend compacts whole free segments and says page compaction is off", "[compaction]") {
  for (bool vmm : {true, false}) {
    INFO("vmm " << vmm);
    reset_simcuda();
    auto instance = make_simcuda_allocator(core::cache_settings::for_backend(vmm));
    core::device_cache& cache = instance->device(0);
    CHECK(cache.stats().page_compaction == (vmm ? 1 : 0));
    std::vector<void*> blocks;
    for (int i = 0; i < 3; ++i) blocks.push_back(instance->allocate(30 * kMiB, 0, nullptr));
    instance->deallocate(blocks[0]);
    instance->deallocate(blocks[2]);
    const compact_result result = cache.compact();
    // vmm: every free page but the kept ones; cudaMalloc: the two whole free segments.
    const std::size_t kept = vmm ? core::kCachedPagesKept * kPage : 0;
    CHECK(result.released_bytes >= 60 * kMiB - kept);
    CHECK(result.released_bytes <= 60 * kMiB);
    if (!vmm) CHECK(result.unmapped_pages == 0);
    check_consistency(cache.snapshot(), cache.stats());
    instance->deallocate(blocks[1]);
  }
}

namespace {

// The compaction paths with one device call failing: fill a small device, free every other
// block, compact, stitch, move pages, compact again. Returns the errors seen.
int compaction_workload(core::allocator& instance, void* stream) {
  int errors = 0;
  std::vector<std::pair<void*, std::uint64_t>> live;
  auto try_allocate = [&](std::size_t bytes, std::uint64_t seed) {
    try {
      void* block = instance.allocate(bytes, 0, stream);
      fill_pattern(block, bytes, seed);
      simcuda_launch(stream, block, bytes, 1);
      live.emplace_back(block, seed);
      return block;
    } catch (const out_of_memory_error& oom) {
      CHECK(std::string(oom.what()).rfind("CUDA out of memory. Tried to allocate ", 0) == 0);
    } catch (const error&) {
    }
    ++errors;
    return static_cast<void*>(nullptr);
  };
  auto sizes = std::map<void*, std::size_t>();
  for (std::uint64_t i = 0; i < 14; ++i)
    if (void* block = try_allocate(4 * kMiB, i)) sizes[block] = 4 * kMiB;
  for (std::size_t i = 0; i < live.size(); i += 2) {
    instance.deallocate(live[i].first);
    sizes.erase(live[i].first);
    live[i].first = nullptr;
  }
  try {
    instance.device(0).compact();  // pending kernels: only idle pages go
  } catch (const error&) {
    ++errors;
  }
  simcuda_complete_all();
  if (void* block = try_allocate(12 * kMiB, 100)) sizes[block] = 12 * kMiB;  // stitched
  if (void* block = try_allocate(3 * kMiB, 101)) sizes[block] = 3 * kMiB;    // page moves
  simcuda_complete_all();
  try {
    instance.device(0).compact();
  } catch (const error&) {
    ++errors;
  }
  for (const auto& [block, seed] : live)
    if (block != nullptr) CHECK(check_pattern(block, sizes[block], seed));
  for (const auto& [block, seed] : live)
    if (block != nullptr) instance.deallocate(block);
  return errors;
}

}  // namespace

TEST_CASE("a VMM call failing in the middle of compaction or stitching loses nothing", "[compaction][faults]") {
  const char* const functions[] = {"cuMemCreate", "cuMemMap", "cuMemSetAccess", "cuMemUnmap", "cuMemRelease",
                                   "cuMemAddressReserve", "cuMemAddressFree", "cudaEventQuery", "cudaEventRecord"};
  core::cache_settings settings;
  settings.virtual_range_factor = 1.0;  // 14 blocks of 4 MiB fill the shared range
  REQUIRE(simcuda_set_capacity(0, 56 * kMiB) == 0);
  // A clean run first: how many calls of each function the workload makes.
  reset_simcuda();
  void* stream = create_stream(0);
  {
    simcuda_reset_counters();
    auto instance = make_simcuda_allocator(settings);
    instance->device(0);
    REQUIRE(compaction_workload(*instance, stream) == 0);
    CHECK(instance->device(0).stats().num_stitched_allocations == 1);
  }
  std::vector<std::pair<const char*, std::uint64_t>> calls;
  for (const char* function : functions) calls.emplace_back(function, simcuda_call_count(function));
  int runs = 0;
  int runs_with_errors = 0;
  for (const auto& [function, count] : calls) {
    for (std::uint64_t nth = 1; nth <= count; ++nth) {
      INFO(function << " call " << nth << " of " << count << " fails");
      reset_simcuda();
      const std::uint64_t used_before = simcuda_used_bytes(0);
      auto instance = make_simcuda_allocator(settings);
      instance->device(0);
      REQUIRE(simcuda_fail(function, nth, 999, SIMCUDA_FAIL_ONCE) == 0);
      runs_with_errors += compaction_workload(*instance, stream) > 0;
      ++runs;
      simcuda_clear_faults();
      simcuda_complete_all();
      core::device_cache& cache = instance->device(0);
      check_consistency(cache.snapshot(), cache.stats());
      // Every physical page is mapped and counted, except one whose cuMemRelease failed: it
      // waits in the retry list until the next pass (checked below by the final release).
      const std::uint64_t held = simcuda_used_bytes(0) - used_before;
      const auto reserved = static_cast<std::uint64_t>(cache.stats().reserved_bytes[pool_all].current);
      if (std::string(function) == "cuMemRelease")
        CHECK((held == reserved || held == reserved + kPage));
      else
        CHECK(held == reserved);
      cache.compact();
      check_consistency(cache.snapshot(), cache.stats());
      cache.release_cache(0);
      CHECK(cache.stats().reserved_bytes[pool_all].current == 0);
      CHECK(simcuda_used_bytes(0) == used_before);
      INFO(race_report());
      CHECK(simcuda_race_count() == 0);
    }
  }
  CHECK(runs > 40);
  CHECK(runs_with_errors > 0);
  destroy_stream(stream);
  REQUIRE(simcuda_set_capacity(0, std::uint64_t{80} << 30) == 0);
}

namespace {

struct loop_outcome {
  std::int64_t last_step_calls = -1;
  std::int64_t peak_reserved_bytes = 0;
  std::int64_t page_moves = 0;
  std::int64_t last_step_moves = 0;  // pages moved, with calls or back where they lay dormant
};

// Six steps of: A and B (6 MiB), free A, C (8 MiB: too large for A's hole), free B and C.
// Peak live 14 MiB (B and C), 7 pages touched at once, 10 pages touched over a step. B and
// C carry patterns checked while both are live.
loop_outcome run_three_block_loop(const core::cache_settings& settings) {
  reset_simcuda();
  auto instance = make_simcuda_allocator(settings);
  core::device_cache& cache = instance->device(0);
  auto calls = [&] { return device_calls(cache.stats()); };
  loop_outcome outcome;
  for (int step = 0; step < 6; ++step) {
    const std::int64_t before = calls();
    const device_stats at_start = cache.stats();
    void* a = instance->allocate(6 * kMiB, 0, nullptr);
    void* b = instance->allocate(6 * kMiB, 0, nullptr);
    fill_pattern(b, 6 * kMiB, 11);
    instance->deallocate(a);
    void* c = instance->allocate(8 * kMiB, 0, nullptr);
    fill_pattern(c, 8 * kMiB, 12);
    CHECK(check_pattern(b, 6 * kMiB, 11));
    CHECK(check_pattern(c, 8 * kMiB, 12));
    instance->deallocate(b);
    instance->deallocate(c);
    outcome.last_step_calls = calls() - before;
    const device_stats at_end = cache.stats();
    outcome.last_step_moves = at_end.num_page_moves + at_end.num_dormant_returns - at_start.num_page_moves -
                              at_start.num_dormant_returns;
  }
  const device_stats stats = cache.stats();
  outcome.peak_reserved_bytes = stats.reserved_bytes[pool_all].peak;
  outcome.page_moves = stats.num_page_moves;
  return outcome;
}

}  // namespace

TEST_CASE("page_moves off: a loop that touches more pages than its peak settles at zero device calls",
          "[compaction]") {
  // With pure page moves, C takes A's freed pages and A takes them back next step, reserved
  // at the peak: calls every step when unmaps are made at once, none after the first steps
  // when they are deferred -- the pages go back and forth between two mappings (Note
  // [Dormant mappings]). With page moves off, C gets new pages once; after that every step
  // finds its pages.
  for (int mode = 0; mode < 3; ++mode) {
    const bool moves = mode < 2;
    const bool deferred = mode == 1;
    INFO("page_moves " << moves << ", deferred_unmaps " << deferred);
    core::cache_settings settings;
    settings.conf.page_moves = moves;
    settings.conf.deferred_unmaps = deferred;
    settings.conf.page_move_headroom = 0.0;  // pure moving (the default with no waiting plan)
    settings.conf.page_move_budget = false;  // moving without limit (Note [Move budget])
    const loop_outcome outcome = run_three_block_loop(settings);
    if (moves) {
      CHECK(outcome.last_step_moves > 0);  // still moving every step
      if (deferred) CHECK(outcome.last_step_calls == 0);
      else CHECK(outcome.last_step_calls > 0);
      CHECK(outcome.peak_reserved_bytes <= static_cast<std::int64_t>(14 * kMiB));  // B and C at once
    } else {
      CHECK(outcome.last_step_calls == 0);
      CHECK(outcome.peak_reserved_bytes <= static_cast<std::int64_t>(20 * kMiB));  // A, B and C
    }
  }
}

TEST_CASE("page_move_headroom: a loop no plan waits for keeps moving at any headroom", "[compaction]") {
  // The growth allowance is granted only once a loop plan has waited to hand over (Note
  // [Page moves]); this loop's step (six events) is shorter than any plan's, so even a
  // headroom of 50 % -- floor(14 * 1.5 / 2) = 10 pages, every page of the step -- creates
  // nothing past the peak touched at once: it keeps moving, reserved memory stays at 7
  // pages. (A loop whose plan waits and then settles within the headroom: plan_budget_test.)
  // (Its moves cost calls with unmaps made at once; deferred, they are returns: above.)
  for (const double headroom : {0.5, 0.1}) {
    INFO("headroom " << headroom);
    core::cache_settings settings;
    settings.conf.page_move_headroom = headroom;
    settings.conf.page_move_budget = false;  // the headroom alone (Note [Move budget])
    settings.conf.deferred_unmaps = false;
    const loop_outcome outcome = run_three_block_loop(settings);
    CHECK(outcome.last_step_calls > 0);
    CHECK(outcome.peak_reserved_bytes <= static_cast<std::int64_t>(14 * kMiB));
    CHECK(outcome.page_moves > 0);
  }
}

TEST_CASE("under a reserved limit a scattered request is stitched without passing the limit", "[compaction]") {
  // Same shape as the device-capacity case, but the bound is the allocator's own limit
  // (max_cached_bytes) on a large device.
  reset_simcuda();
  core::cache_settings settings;
  settings.virtual_range_factor = 1.0;
  settings.conf.max_cached_bytes = 64 * kMiB;
  auto instance = make_simcuda_allocator(settings);
  core::device_cache& cache = instance->device(0);
  std::vector<void*> blocks;
  for (int i = 0; i < 16; ++i) {
    blocks.push_back(instance->allocate(4 * kMiB, 0, nullptr));
    fill_pattern(blocks.back(), 4 * kMiB, static_cast<std::uint64_t>(1000 + i));
  }
  for (int i = 0; i < 16; i += 2) instance->deallocate(blocks[static_cast<std::size_t>(i)]);
  const device_stats before = cache.stats();
  REQUIRE(before.largest_free_block_bytes < static_cast<std::int64_t>(20 * kMiB));
  void* stitched = instance->allocate(20 * kMiB, 0, nullptr);
  fill_pattern(stitched, 20 * kMiB, 7);
  const device_stats after = cache.stats();
  CHECK(after.num_stitched_allocations + after.num_page_moves >
        before.num_stitched_allocations + before.num_page_moves);
  CHECK(after.reserved_bytes[pool_all].peak <= static_cast<std::int64_t>(64 * kMiB));
  for (int i = 1; i < 16; i += 2)
    CHECK(check_pattern(blocks[static_cast<std::size_t>(i)], 4 * kMiB, static_cast<std::uint64_t>(1000 + i)));
  CHECK(check_pattern(stitched, 20 * kMiB, 7));
  check_consistency(cache.snapshot(), cache.stats());
  // 12 MiB of free pages left under the limit: 16 MiB cannot be had.
  CHECK(oom_text_of(*instance, 16 * kMiB).rfind("CUDA out of memory", 0) == 0);
  CHECK(cache.stats().reserved_bytes[pool_all].peak <= static_cast<std::int64_t>(64 * kMiB));
  check_consistency(cache.snapshot(), cache.stats());
  instance->deallocate(stitched);
  for (int i = 1; i < 16; i += 2) instance->deallocate(blocks[static_cast<std::size_t>(i)]);
}

TEST_CASE("the cudaMalloc backend releases exactly the segments that are wholly free", "[compaction]") {
  reset_simcuda();
  core::cache_settings settings;
  settings.conf.backend = fragless::backend_kind::cuda_malloc;
  auto instance = make_simcuda_allocator(settings);
  core::device_cache& cache = instance->device(0);
  std::mt19937_64 random(5);
  std::vector<void*> live;
  for (int i = 0; i < 300; ++i)
    live.push_back(instance->allocate(random() % 2 ? 512 + random() % 100000 : kMiB + random() % (20 * kMiB), 0, nullptr));
  std::shuffle(live.begin(), live.end(), random);
  while (live.size() > 60) {
    instance->deallocate(live.back());
    live.pop_back();
  }
  std::size_t whole_free_bytes = 0;
  for (const snapshot_segment& segment : cache.snapshot().segments) {
    bool all_free = true;
    for (const snapshot_block& block : segment.blocks) all_free = all_free && block.state == block_state::free;
    if (all_free) whole_free_bytes += segment.size_bytes;
  }
  REQUIRE(whole_free_bytes > 0);
  const std::int64_t reserved_before = cache.stats().reserved_bytes[pool_all].current;
  const compact_result result = cache.compact();
  CHECK(result.released_bytes == whole_free_bytes);
  CHECK(result.unmapped_pages == 0);
  CHECK(cache.stats().reserved_bytes[pool_all].current == reserved_before - static_cast<std::int64_t>(whole_free_bytes));
  CHECK(cache.stats().page_compaction == 0);
  check_consistency(cache.snapshot(), cache.stats());
  for (void* block : live) instance->deallocate(block);
}
