// Physical chunks (Note [Physical chunks] in allocator/core/vmm_pool_pages.cpp), as
// properties over random seeds on simcuda:
//  - the physical allocations under live blocks partition their pages: every block is
//    covered, in address order, by whole chunks; two blocks' chunks are the same or
//    disjoint; no chunk is larger than physical_chunk_fraction of the peak reserved memory
//    or physical_chunk_run_fraction of the largest block (one page at least); live blocks
//    never overlap and their data survives moves and compaction; the race oracle stays at
//    zero;
//  - after release_cache(0) reserved memory is exactly the chunks live blocks touch (a chunk
//    with no live page is always given back whole);
//  - a run of missing pages is one create and one map, so growing to many pages takes far
//    fewer device calls than one page at a time, and physical_chunk_fraction 0 restores one
//    page per allocation; a block as large as reserved memory takes at most
//    1/physical_chunk_run_fraction chunks;
//  - until the first free, chunks may reach physical_chunk_first_growth_bytes or 1/16 of
//    reserved memory, whichever is less (Note [First growth]), and after it the fractions
//    alone apply again;
//  - a run that fits one chunk takes its block's edge pages into that chunk (before the
//    first free, only a run of at most 4 pages); a longer run keeps them apart, each a
//    chunk of one page.
#include <catch2/catch.hpp>

#include <simcuda/control.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <tuple>
#include <vector>

#include "consistency.hpp"
#include "simcuda_support.hpp"

using namespace fragless;
using namespace fragless::testing;

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kPage = 2 * kMiB;

struct block {
  void* address;
  std::size_t size_bytes;
  std::uint64_t seed;
};

// Checks the chunk partition under the live blocks; returns base -> bytes of every chunk a
// live block touches.
std::map<std::uintptr_t, std::size_t> check_chunks(core::device_cache& cache, const std::vector<block>& live,
                                                   std::size_t chunk_cap_bytes) {
  std::map<std::uintptr_t, std::size_t> chunks;
  std::map<std::uintptr_t, std::size_t> blocks;
  for (const block& b : live) {
    const auto address = reinterpret_cast<std::uintptr_t>(b.address);
    blocks.emplace(address, b.size_bytes);
    const auto pieces = cache.shared_pieces(address, b.size_bytes);
    REQUIRE(!pieces.empty());
    CHECK(pieces.front().base <= address);
    CHECK(pieces.back().base + pieces.back().bytes >= address + b.size_bytes);
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      const auto& piece = pieces[i];
      CHECK(piece.bytes % kPage == 0);
      CHECK(piece.bytes <= chunk_cap_bytes);
      if (i > 0) CHECK(pieces[i - 1].base + pieces[i - 1].bytes == piece.base);  // contiguous
      auto [at, inserted] = chunks.emplace(piece.base, piece.bytes);
      if (!inserted) CHECK(at->second == piece.bytes);  // the same chunk seen from two blocks
    }
  }
  // Distinct chunks never overlap, nor do live blocks.
  for (auto at = chunks.begin(); at != chunks.end() && std::next(at) != chunks.end(); ++at)
    CHECK(at->first + at->second <= std::next(at)->first);
  for (auto at = blocks.begin(); at != blocks.end() && std::next(at) != blocks.end(); ++at)
    CHECK(at->first + at->second <= std::next(at)->first);
  return chunks;
}

// The largest chunk the property test's workload may create: 1/8 of the peak reserved
// memory, or the run's share of its largest block (1 MiB << 6 plus 63 half-MiB), or (before
// the first free) physical_chunk_first_growth_bytes, one page at least.
std::size_t largest_chunk_bytes(const device_stats& stats) {
  const core::cache_settings defaults;
  const std::size_t largest_run_pages = ((std::size_t{1} << 26) + 63 * 512 * 1024) / kPage;
  const auto run_share_pages = static_cast<std::size_t>(
      std::ceil(static_cast<double>(largest_run_pages) * defaults.conf.physical_chunk_run_fraction));
  const auto reserved_share_bytes =
      static_cast<std::size_t>(static_cast<double>(stats.reserved_bytes[pool_all].peak) * 0.125) / kPage * kPage;
  return std::max({kPage, reserved_share_bytes, run_share_pages * kPage,
                   defaults.conf.physical_chunk_first_growth_bytes / kPage * kPage});
}

}  // namespace

TEST_CASE("physical chunks: partition, bound, data intact, whole release", "[chunks]") {
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    INFO("seed " << seed);
    reset_simcuda();
    core::cache_settings settings;
    settings.conf.physical_chunk_fraction = 0.125;
    auto instance = make_simcuda_allocator(settings);
    core::device_cache& cache = instance->device(0);
    REQUIRE(cache.uses_vmm());
    void* streams[2] = {create_stream(), create_stream()};
    std::mt19937_64 random(seed);
    std::vector<block> live;
    std::uint64_t pattern = seed * 100000;
    for (int op = 0; op < 600; ++op) {
      if (live.empty() || random() % 5 < 3) {
        // Sizes from 1 MiB to 96 MiB, log-uniform-ish: many pages missing at once.
        const std::size_t bytes = (std::size_t{1} << (20 + random() % 7)) + (random() % 64) * 512 * 1024;
        void* stream = streams[random() % 2];
        void* address = instance->allocate(bytes, 0, stream);
        REQUIRE(address != nullptr);
        fill_pattern(address, bytes, ++pattern);
        live.push_back({address, bytes, pattern});
      } else {
        const std::size_t index = random() % live.size();
        CHECK(check_pattern(live[index].address, live[index].size_bytes, live[index].seed));
        instance->deallocate(live[index].address);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(index));
      }
      if (op % 50 == 49) {
        const device_stats stats = cache.stats();
        const auto cap = largest_chunk_bytes(stats);
        check_chunks(cache, live, cap);
        check_consistency(cache.snapshot(), stats);
      }
      if (op % 200 == 199) {
        // Everything no live block's chunk touches goes back; the chunks under live blocks
        // stay whole.
        cache.release_cache(0);
        const device_stats stats = cache.stats();
        const auto cap = largest_chunk_bytes(stats);
        std::size_t chunk_bytes = 0;
        for (const auto& [base, bytes] : check_chunks(cache, live, cap)) chunk_bytes += bytes;
        CHECK(static_cast<std::size_t>(stats.reserved_bytes[pool_all].current) == chunk_bytes);
      }
    }
    for (const block& b : live) {
      CHECK(check_pattern(b.address, b.size_bytes, b.seed));
      instance->deallocate(b.address);
    }
    cache.release_cache(0);
    CHECK(cache.stats().reserved_bytes[pool_all].current == 0);
    for (void* stream : streams) {
      instance->device(0).retire_stream(stream);
      destroy_stream(stream);
    }
    INFO(race_report());
    CHECK(simcuda_race_count() == 0);
  }
}

TEST_CASE("physical chunks: a run of missing pages is one create and one map", "[chunks]") {
  auto grow = [](double fraction) {
    reset_simcuda();
    core::cache_settings settings;
    settings.conf.physical_chunk_fraction = fraction;
    settings.conf.physical_chunk_first_growth_bytes = 0;  // the fractions alone (its own test below)
    settings.conf.physical_chunk_pinned_fraction = 0;     // no pinned-page budget (its own test below)
    auto instance = make_simcuda_allocator(settings);
    core::device_cache& cache = instance->device(0);
    std::vector<void*> blocks;
    // 64 blocks of 32 MiB (16 pages each): 2 GiB, held at once.
    for (int i = 0; i < 64; ++i) blocks.push_back(instance->allocate(32 * kMiB, 0, nullptr));
    const device_stats stats = cache.stats();
    for (void* b : blocks) instance->deallocate(b);
    return stats;
  };
  const device_stats paged = grow(0.0);
  CHECK(paged.num_device_alloc == 1024);  // one per 2 MiB page
  CHECK(paged.num_map == 1024);
  const device_stats chunked = grow(0.0625);
  CHECK(chunked.reserved_bytes[pool_all].peak == paged.reserved_bytes[pool_all].peak);
  // Each block's 16 pages come as chunks of at most 1/16 of reserved memory: pages one at a
  // time until 32 MiB are reserved, growing chunks until 512 MiB are, then the whole run
  // of each block: 124 chunks, as the rule computes by hand.
  INFO("creates " << chunked.num_device_alloc << " maps " << chunked.num_map);
  CHECK(chunked.num_device_alloc == chunked.num_map);
  CHECK(chunked.num_device_alloc == 124);
}

TEST_CASE("physical chunks: a block large next to reserved memory takes few chunks", "[chunks]") {
  // A program growing from nothing: its first block is all of reserved memory, so the
  // reserved fraction alone cut it into hundreds of one-page chunks. The run's share
  // (physical_chunk_run_fraction) backs the run with at most 1/that chunks.
  auto first_block = [](double run_fraction, double pinned_fraction, bool after_a_free = false) {
    reset_simcuda();
    core::cache_settings settings;  // physical_chunk_fraction 1/256, the default
    settings.conf.physical_chunk_run_fraction = run_fraction;
    settings.conf.physical_chunk_first_growth_bytes = 0;  // the fractions alone (its own test below)
    settings.conf.physical_chunk_pinned_fraction = pinned_fraction;
    auto instance = make_simcuda_allocator(settings);
    core::device_cache& cache = instance->device(0);
    if (after_a_free) {
      // A page made and freed first: the pool has freed a block, the page stays cached
      // under the next block, and that block lacks 255 pages.
      void* page = instance->allocate(kPage, 0, nullptr);
      instance->deallocate(page);
    }
    const std::int64_t creates_before = cache.stats().num_device_alloc;
    // 256 pages, page-aligned; below dedicated_mapping_threshold_bytes, so in the shared range.
    void* block = instance->allocate(512 * kMiB, 0, nullptr);
    fill_pattern(block, 512 * kMiB, 7);
    device_stats stats = cache.stats();
    stats.num_device_alloc -= creates_before;
    CHECK(check_pattern(block, 512 * kMiB, 7));
    instance->deallocate(block);
    return stats;
  };
  const device_stats reserved_only = first_block(0.0, 0.0);
  const device_stats run_share = first_block(1.0 / 32, 0.0);
  INFO("creates: reserved fraction alone " << reserved_only.num_device_alloc << ", with the run's share "
                                           << run_share.num_device_alloc);
  CHECK(run_share.reserved_bytes[pool_all].peak == reserved_only.reserved_bytes[pool_all].peak);
  // 256 pages in chunks of 256 / 32 = 8 pages (reserved memory's 1/256 stays below that).
  CHECK(run_share.num_device_alloc == 32);
  CHECK(run_share.num_map == 32);
  // Reserved memory stays below 512 MiB, where 1/256 of it is less than a page: one page
  // at a time.
  CHECK(reserved_only.num_device_alloc == 256);
  // Note [Pinned pages]: before the pool first frees a block the budget does not apply;
  // after it, the budget (1/100 of reserved memory, under 3 pages here) never cuts a chunk
  // below half the run's share: the 255 missing pages in chunks of ceil(255 / 64) = 4
  // pages, 64 of them -- against ceil(255 / 32) = 8 pages, 32 chunks, without the budget.
  const device_stats budgeted_from_nothing = first_block(1.0 / 32, 0.01);
  CHECK(budgeted_from_nothing.num_device_alloc == 32);
  const device_stats budgeted = first_block(1.0 / 32, 0.01, true);
  CHECK(budgeted.reserved_bytes[pool_all].peak == reserved_only.reserved_bytes[pool_all].peak);
  CHECK(budgeted.num_device_alloc == 64);
  CHECK(first_block(1.0 / 32, 0.0, true).num_device_alloc == 32);
}

TEST_CASE("physical chunks: until the first free a run takes chunks of the first-growth size", "[chunks]") {
  // Note [First growth]: before any block is freed no chunk can hold a free page, so a
  // created chunk may reach physical_chunk_first_growth_bytes (20 MiB by default) or 1/16
  // of reserved memory, whichever is less; the first free ends that, and the fractions
  // alone cut runs again.
  auto grow = [](std::size_t first_growth_bytes) {
    reset_simcuda();
    core::cache_settings settings;  // physical_chunk_fraction 1/256, run share 1/32
    settings.conf.physical_chunk_first_growth_bytes = first_growth_bytes;
    settings.conf.physical_chunk_pinned_fraction = 0;  // no pinned-page budget (its own test below)
    settings.exact_start_allocations = 0;
    auto instance = make_simcuda_allocator(settings);
    core::device_cache& cache = instance->device(0);
    std::vector<void*> blocks;
    // 16 blocks of 32 MiB (16 pages each, page-aligned one after another), then a 2 MiB one.
    for (int i = 0; i < 16; ++i) {
      blocks.push_back(instance->allocate(32 * kMiB, 0, nullptr));
      fill_pattern(blocks.back(), 32 * kMiB, static_cast<std::uint64_t>(i));
    }
    void* small = instance->allocate(2 * kMiB, 0, nullptr);
    const device_stats grown = cache.stats();
    const std::vector<std::size_t> last_piece_bytes = chunk_bytes_under(cache, blocks.back(), 32 * kMiB);
    // The first free, then a block that lacks pages again.
    instance->deallocate(small);
    void* after = instance->allocate(32 * kMiB, 0, nullptr);
    fill_pattern(after, 32 * kMiB, 99);
    const std::vector<std::size_t> after_piece_bytes = chunk_bytes_under(cache, after, 32 * kMiB);
    const device_stats end = cache.stats();
    for (int i = 0; i < 16; ++i)
      CHECK(check_pattern(blocks[static_cast<std::size_t>(i)], 32 * kMiB, static_cast<std::uint64_t>(i)));
    CHECK(check_pattern(after, 32 * kMiB, 99));
    for (void* b : blocks) instance->deallocate(b);
    instance->deallocate(after);
    return std::make_tuple(grown, last_piece_bytes, after_piece_bytes, end);
  };
  // The rule by hand: each of the 16 runs of 16 pages is cut into chunks of the largest of
  // one page, 1/256 of reserved memory (under a page throughout), 1/32 of the run (under a
  // page) and min(10 pages, 1/16 of reserved memory); then the small block's one page.
  std::size_t reserved_pages = 0;
  std::int64_t expected_creates = 0;
  for (int block = 0; block < 16; ++block) {
    for (std::size_t left = 16; left > 0; ++expected_creates) {
      const std::size_t cap = std::max<std::size_t>(1, std::min<std::size_t>(10, reserved_pages / 16));
      const std::size_t chunk = std::min(cap, left);
      left -= chunk;
      reserved_pages += chunk;
    }
  }
  ++expected_creates;
  const auto [grown, last_pieces, after_pieces, end] = grow(20 * kMiB);
  const auto [grown_off, last_pieces_off, after_pieces_off, end_off] = grow(0);
  INFO("creates before the free: " << grown.num_device_alloc << " (by hand " << expected_creates
                                   << ", off: " << grown_off.num_device_alloc << ")");
  CHECK(grown.reserved_bytes[pool_all].peak == grown_off.reserved_bytes[pool_all].peak);
  CHECK(grown.num_device_alloc == expected_creates);
  CHECK(grown.num_map == expected_creates);
  // Off: below 512 MiB reserved, 1/256 of it and 1/32 of a 16-page run are less than a page.
  CHECK(grown_off.num_device_alloc == 16 * 16 + 1);
  // The last block, with 480 MiB reserved: a 20 MiB chunk and a 12 MiB one.
  CHECK(last_pieces == std::vector<std::size_t>{20 * kMiB, 12 * kMiB});
  // After the first free the new block's missing pages are one-page chunks again, as off.
  CHECK(after_pieces == after_pieces_off);
  CHECK(!after_pieces.empty());
  for (std::size_t bytes : after_pieces) CHECK(bytes == kPage);
  CHECK(end.num_device_alloc - grown.num_device_alloc == end_off.num_device_alloc - grown_off.num_device_alloc);
  INFO(race_report());
  CHECK(simcuda_race_count() == 0);
}

TEST_CASE("physical chunks: a run that fits one chunk takes its edge pages", "[chunks]") {
  // Note [Physical chunks]: a page a block covers only in part (an edge page) joins the
  // run when the run, with it, fits one chunk under the caps; otherwise it is a chunk of
  // its own. Before the pool's first free (Note [First growth]), only a run of at most 4
  // pages takes them.
  auto grow = [](double fraction, std::size_t first_growth_bytes) {
    reset_simcuda();
    core::cache_settings settings;
    settings.conf.physical_chunk_fraction = fraction;
    settings.conf.physical_chunk_first_growth_bytes = first_growth_bytes;
    settings.conf.physical_chunk_pinned_fraction = 0;  // no pinned-page budget (its own test)
    settings.exact_start_allocations = 0;
    return make_simcuda_allocator(settings);
  };
  for (const std::size_t first_growth_bytes : {std::size_t{0}, 20 * kMiB}) {
    INFO("physical_chunk_first_growth_bytes " << first_growth_bytes);
    const bool first_growth = first_growth_bytes != 0;
    // 1/16 of reserved memory (16 MiB and more here) is larger than every run below.
    auto instance = grow(1.0 / 16, first_growth_bytes);
    core::device_cache& cache = instance->device(0);
    // 256 MiB first, page-aligned.
    void* base = instance->allocate(256 * kMiB, 0, nullptr);
    REQUIRE(reinterpret_cast<std::uintptr_t>(base) % kPage == 0);
    // Eight blocks of 5 MiB (2.5 pages) one after another: runs of 3 and 2 missing pages.
    std::vector<void*> blocks;
    const std::int64_t creates_before = cache.stats().num_device_alloc;
    for (int i = 0; i < 8; ++i) {
      blocks.push_back(instance->allocate(5 * kMiB, 0, nullptr));
      fill_pattern(blocks.back(), 5 * kMiB, static_cast<std::uint64_t>(i));
    }
    const std::int64_t small_creates = cache.stats().num_device_alloc - creates_before;
    // By hand: 20 pages for eight blocks; each block's run (its pages not under the block
    // before it) is one chunk -- 3 pages with a shared last one, then 2 whole ones, ...
    CHECK(small_creates == 8);
    CHECK(chunk_bytes_under(cache, blocks.front(), 5 * kMiB) == std::vector<std::size_t>{6 * kMiB});
    // Then 11 MiB, page-aligned: a run of 6 missing pages, its last page shared -- one
    // chunk, but before the first free (first growth on) more than 4 pages: 5 whole pages,
    // then the shared one.
    void* longer = instance->allocate(11 * kMiB, 0, nullptr);
    fill_pattern(longer, 11 * kMiB, 11);
    const std::vector<std::size_t> longer_pieces =
        first_growth ? std::vector<std::size_t>{10 * kMiB, 2 * kMiB} : std::vector<std::size_t>{12 * kMiB};
    CHECK(chunk_bytes_under(cache, longer, 11 * kMiB) == longer_pieces);
    // The first free (the 5 MiB hole fits nothing below), then 6 MiB after the 11 MiB
    // block: the page it shares with that block is mapped (that block's last chunk), and
    // its run of 3 missing pages, the last one shared, is one chunk again.
    instance->deallocate(blocks.front());
    void* after = instance->allocate(6 * kMiB, 0, nullptr);
    fill_pattern(after, 6 * kMiB, 6);
    CHECK(chunk_bytes_under(cache, after, 6 * kMiB) == std::vector<std::size_t>{longer_pieces.back(), 6 * kMiB});
    for (std::size_t i = 1; i < blocks.size(); ++i) {
      CHECK(check_pattern(blocks[i], 5 * kMiB, static_cast<std::uint64_t>(i)));
      instance->deallocate(blocks[i]);
    }
    CHECK(check_pattern(longer, 11 * kMiB, 11));
    CHECK(check_pattern(after, 6 * kMiB, 6));
    for (void* b : {base, longer, after}) instance->deallocate(b);
  }
  {
    // 1/64 of reserved memory: chunks of 2 pages (4 MiB) next to 256-272 MiB.
    auto instance = grow(1.0 / 64, 0);
    core::device_cache& cache = instance->device(0);
    void* base = instance->allocate(256 * kMiB, 0, nullptr);
    REQUIRE(reinterpret_cast<std::uintptr_t>(base) % kPage == 0);
    // 3 MiB: a whole page and a shared one, a run of 2 -- one chunk with its edge page.
    void* short_block = instance->allocate(3 * kMiB, 0, nullptr);
    fill_pattern(short_block, 3 * kMiB, 3);
    CHECK(chunk_bytes_under(cache, short_block, 3 * kMiB) == std::vector<std::size_t>{4 * kMiB});
    // 14 MiB after it: the shared page is mapped, then a run of 7 missing pages, the last
    // one shared -- longer than a chunk. It is taken from its start, 2 pages at a time;
    // the rest of the run never fits one chunk with the shared page (3 pages with it), so
    // that page is a chunk of its own: 2, 2, 2 whole pages, then the edge page.
    void* long_block = instance->allocate(14 * kMiB, 0, nullptr);
    fill_pattern(long_block, 14 * kMiB, 14);
    CHECK(chunk_bytes_under(cache, long_block, 14 * kMiB) ==
          std::vector<std::size_t>{4 * kMiB, 4 * kMiB, 4 * kMiB, 4 * kMiB, 2 * kMiB});
    // 8 MiB after that: the shared page is mapped, then 3 whole pages and a shared one --
    // 2 whole pages first, then the rest, a whole page and the shared one, fits a chunk.
    void* tail_block = instance->allocate(8 * kMiB, 0, nullptr);
    fill_pattern(tail_block, 8 * kMiB, 8);
    CHECK(chunk_bytes_under(cache, tail_block, 8 * kMiB) ==
          std::vector<std::size_t>{2 * kMiB, 4 * kMiB, 4 * kMiB});
    CHECK(check_pattern(short_block, 3 * kMiB, 3));
    CHECK(check_pattern(long_block, 14 * kMiB, 14));
    CHECK(check_pattern(tail_block, 8 * kMiB, 8));
    for (void* b : {base, short_block, long_block, tail_block}) instance->deallocate(b);
  }
  INFO(race_report());
  CHECK(simcuda_race_count() == 0);
}

namespace {

// A chunk workload: growth past the cap, frees that leave partly live chunks, moves (past
// the allowance), a release, more growth.
void chunk_workload(core::allocator& instance, void* stream_a, void* stream_b, int* errors) {
  std::vector<void*> live;
  auto try_allocate = [&](std::size_t bytes, void* stream) {
    try {
      live.push_back(instance.allocate(bytes, 0, stream));
    } catch (const error&) {
      ++*errors;
    }
  };
  for (std::size_t mib : {9, 33, 17, 65, 5, 40}) try_allocate(mib * kMiB, stream_a);
  if (live.size() > 3) {
    instance.deallocate(live[1]);
    instance.deallocate(live[3]);
    live.erase(live.begin() + 3);
    live.erase(live.begin() + 1);
  }
  for (std::size_t mib : {20, 3, 48}) try_allocate(mib * kMiB, stream_b);
  simcuda_complete_all();
  try {
    instance.device(0).release_cache(0);
  } catch (const error&) {
    ++*errors;
  }
  try_allocate(70 * kMiB, stream_a);
  for (void* block : live) instance.deallocate(block);
}

}  // namespace

TEST_CASE("physical chunks: every VMM call failing once leaves no leak and consistent stats", "[chunks][faults]") {
  const char* const functions[] = {"cuMemCreate", "cuMemMap", "cuMemSetAccess", "cuMemUnmap", "cuMemRelease"};
  core::cache_settings settings;
  settings.conf.physical_chunk_fraction = 0.125;
  int exercised = 0;
  for (const char* function : functions) {
    reset_simcuda();
    REQUIRE(simcuda_set_capacity(0, std::uint64_t{512} << 20) == 0);
    std::uint64_t count = 0;
    {
      void* stream_a = create_stream(0);
      void* stream_b = create_stream(0);
      simcuda_reset_counters();
      auto instance = make_simcuda_allocator(settings);
      int errors = 0;
      chunk_workload(*instance, stream_a, stream_b, &errors);
      CHECK(errors == 0);
      count = simcuda_call_count(function);
      destroy_stream(stream_a);
      destroy_stream(stream_b);
    }
    exercised += count > 0;
    for (std::uint64_t nth = 1; nth <= count; ++nth) {
      for (int code : {2, 999}) {  // out of memory, unknown
        INFO(function << " call " << nth << " of " << count << " fails with " << code);
        reset_simcuda();
        REQUIRE(simcuda_set_capacity(0, std::uint64_t{512} << 20) == 0);
        void* stream_a = create_stream(0);
        void* stream_b = create_stream(0);
        const std::uint64_t used_before = simcuda_used_bytes(0);
        {
          auto instance = make_simcuda_allocator(settings);
          instance->device(0);
          REQUIRE(simcuda_fail(function, nth, code, SIMCUDA_FAIL_ONCE) == 0);
          int errors = 0;
          chunk_workload(*instance, stream_a, stream_b, &errors);
          simcuda_clear_faults();
          simcuda_complete_all();
          check_releases_everything(instance->device(0));
        }
        CHECK(simcuda_used_bytes(0) == used_before);
        INFO(race_report());
        CHECK(simcuda_race_count() == 0);
        destroy_stream(stream_a);
        destroy_stream(stream_b);
      }
    }
  }
  CHECK(exercised == 5);
}
