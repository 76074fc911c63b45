// Unit tests of the CUDA-free building blocks: size classes, free index, page map, page set.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <unordered_map>
#include <vector>

#include "core/free_index.hpp"
#include "core/page_map.hpp"
#include "core/page_set.hpp"
#include "core/size_classes.hpp"
#include "core/small_pool.hpp"
#include "core/window_positions.hpp"
#include "test_scale.hpp"

using namespace fragless::core;

TEST_CASE("size classes meet the documented waste bound", "[size_classes]") {
  std::size_t previous = 0;
  for (std::size_t c = 0; c < kClassCount; ++c) {
    const std::size_t size = class_size_bytes(c);
    REQUIRE(size % kBlockAlignment == 0);
    REQUIRE(size > previous);  // strictly increasing
    previous = size;
    REQUIRE(full_slab_bytes(c) % size == 0);
    REQUIRE(full_slab_bytes(c) / size >= 8);
    REQUIRE(full_slab_bytes(c) >= 64 * 1024);
    // Note [Slab growth]: from max(1 object, 8 KiB), doubling, capped at the full size.
    std::size_t last = 0;
    for (std::size_t existing = 0; existing < 12; ++existing) {
      const std::size_t bytes = slab_bytes(c, existing);
      REQUIRE(bytes % size == 0);
      REQUIRE(bytes >= size);
      REQUIRE(bytes <= full_slab_bytes(c));
      if (existing == 0) REQUIRE(bytes >= std::min<std::size_t>(8 * 1024, full_slab_bytes(c)));
      if (existing > 0) REQUIRE((bytes == full_slab_bytes(c) || bytes == 2 * last));
      last = bytes;
    }
    REQUIRE(slab_bytes(c, 11) == full_slab_bytes(c));
  }
  REQUIRE(class_size_bytes(kClassCount - 1) == kSmallLimitBytes);
  for (std::size_t request = 1; request <= kSmallLimitBytes; ++request) {
    const std::size_t c = class_of(request);
    REQUIRE(c < kClassCount);
    const std::size_t rounded = rounded_request_bytes(request);
    const std::size_t size = class_size_bytes(c);
    REQUIRE(size >= rounded);
    // Smallest fitting class.
    if (c > 0) REQUIRE(class_size_bytes(c - 1) < rounded);
    if (rounded <= 4096) REQUIRE(size == rounded);
    else REQUIRE((size - rounded) * 8 < rounded);  // waste strictly below 12.5 %
  }
  REQUIRE(class_of(0) == 0);
  REQUIRE(!is_small(kSmallLimitBytes + 1));
}

// Note [Slab growth]: slabs of a class double as the shard adds them, and once the shard
// gave its empty slabs back, the next one is as large as the largest it had -- not small
// again -- while a class the shard never used still starts small.
TEST_CASE("a shard's next slab of a class is as large as its largest so far", "[slab_growth]") {
  stream_shard shard(nullptr);
  const std::size_t used = class_of(4096), unused = class_of(8192);
  std::uintptr_t address = std::uintptr_t{1} << 30;
  auto add_slab = [&] {
    const std::size_t bytes = slab_bytes(used, shard.class_slab_doublings(used));
    shard.add_slab(make_slab(address, used, bytes));
    address += bytes;
    return bytes;
  };
  REQUIRE(shard.class_slab_doublings(used) == 0);
  std::vector<std::size_t> sizes;
  for (int slab = 0; slab < 3; ++slab) sizes.push_back(add_slab());
  REQUIRE(sizes[1] == 2 * sizes[0]);
  REQUIRE(sizes[2] == 2 * sizes[1]);
  REQUIRE(shard.take_empty_slabs().size() == 3);
  REQUIRE(shard.class_slab_doublings(used) == 2);
  REQUIRE(add_slab() == sizes[2]);  // where it was sizes[0] before
  REQUIRE(add_slab() == sizes[2]);
  REQUIRE(add_slab() == sizes[2]);
  REQUIRE(add_slab() == 2 * sizes[2]);  // more slabs than it had: growing on
  REQUIRE(shard.class_slab_doublings(unused) == 0);
}

TEST_CASE("free index: best fit, address order, coalescing", "[free_index]") {
  free_index index;
  index.insert({0x10000, 4096, 0, {}});
  index.insert({0x20000, 1024, 0, {}});
  index.insert({0x30000, 1024, 0, {}});
  REQUIRE(index.range_count() == 3);
  auto fit = index.best_fit(1000);
  REQUIRE(fit);
  CHECK(fit->address == 0x20000);  // smallest, then lowest address
  fit = index.best_fit(2000);
  REQUIRE(fit);
  CHECK(fit->address == 0x10000);
  CHECK(!index.best_fit(8192));
  index.carve(0x10000 + 512, 1024);
  CHECK(index.range_count() == 4);
  CHECK(index.free_bytes() == 4096 - 1024 + 2048);
  index.insert({0x10000 + 512, 1024, 0, fragless::core::stream_set(reinterpret_cast<void*>(7))});
  REQUIRE(index.range_count() == 3);
  auto merged = index.containing(0x10000 + 100);
  REQUIRE(merged);
  CHECK(merged->size_bytes == 4096);
  CHECK(merged->streams.contains(reinterpret_cast<void*>(7)));
  // Different segments never merge.
  index.insert({0x20000 + 1024, 512, 5, {}});
  CHECK(index.range_count() == 4);
  index.forget_streams();
  CHECK(index.containing(0x10000)->streams.empty());
}

TEST_CASE("free index: random carve/insert keeps ranges maximal and bytes exact", "[free_index]") {
  std::mt19937_64 random(42);
  free_index index;
  const std::uintptr_t base = 1 << 20;
  const std::size_t total = 4096 * 512;
  index.insert({base, total, 0, {}});
  std::vector<std::pair<std::uintptr_t, std::size_t>> taken;
  std::size_t taken_bytes = 0;
  for (int step = 0; step < 20000; ++step) {
    if (taken.empty() || random() % 2) {
      const std::size_t size = (1 + random() % 64) * 512;
      auto fit = index.best_fit(size);
      if (!fit) continue;
      REQUIRE(fit->size_bytes >= size);
      index.carve(fit->address, size);
      taken.push_back({fit->address, size});
      taken_bytes += size;
    } else {
      const std::size_t at = random() % taken.size();
      index.insert({taken[at].first, taken[at].second, 0, {}});
      taken_bytes -= taken[at].second;
      taken[at] = taken.back();
      taken.pop_back();
    }
    REQUIRE(index.free_bytes() + taken_bytes == total);
  }
  for (auto& [address, size] : taken) index.insert({address, size, 0, {}});
  REQUIRE(index.range_count() == 1);
  REQUIRE(index.largest_bytes() == total);
}

TEST_CASE("free index: a piece segment keeps apart ranges freed by different streams", "[free_index]") {
  using fragless::core::stream_set;
  void* const first = reinterpret_cast<void*>(1);
  void* const second = reinterpret_cast<void*>(2);
  constexpr std::uint64_t pieces = fragless::core::kPieceSegmentFlag | 1;
  free_index index;
  index.insert({0x10000, 4096, 0, stream_set(second)});  // an ordinary range just below
  index.insert({0x11000, 1024, pieces, stream_set(first, 3)});
  index.insert({0x11400, 1024, pieces, stream_set(second, 4)});
  index.insert({0x11800, 1024, pieces, stream_set(first, 5)});
  CHECK(index.range_count() == 4);  // neither merges with the other stream's piece nor segment 0
  // A piece between two of the same streams joins them; the later tick is kept.
  index.carve(0x11400, 1024);
  index.insert({0x11400, 1024, pieces, stream_set(first, 9)});
  REQUIRE(index.range_count() == 2);
  REQUIRE(index.containing(0x11000)->size_bytes == 3072);
  CHECK(index.containing(0x11000)->streams.tick_of(first, 0) == 9);
  index.carve(0x11400, 1024);
  index.insert({0x11400, 1024, pieces, stream_set(second)});
  REQUIRE(index.range_count() == 4);
  // Pieces are found by address only: best fit sees segment 0 alone.
  CHECK(index.best_fit(512)->address == 0x10000);
  CHECK(!index.best_fit(8192));
  CHECK(index.largest_bytes() == 4096);
  CHECK(index.free_bytes() == 4096 + 3072);
  // A block over pieces waits for their streams, and only theirs.
  stream_set streams;
  REQUIRE(index.streams_across(0x11000, 1024, pieces, &streams));
  CHECK(streams == stream_set(first));
  REQUIRE(index.streams_across(0x11200, 1024, pieces, &streams));  // half of each of two pieces
  CHECK(streams.size() == 2);
  CHECK(!index.streams_across(0x10e00, 1024, pieces, &streams));  // partly segment 0
  CHECK(!index.streams_across(0x11a00, 1024, pieces, &streams));   // past the last piece
  // Carved across pieces, what is left of each stays with its streams.
  index.carve_across(0x11200, 1024);
  CHECK(index.free_bytes() == 4096 + 2048);
  CHECK(index.containing(0x11000)->size_bytes == 512);
  CHECK(index.containing(0x11600)->size_bytes == 512);
  CHECK(index.containing(0x11600)->streams == stream_set(second));
  CHECK(!index.containing(0x11300));
  // Extents (what a snapshot shows) join touching pieces, and only pieces.
  std::vector<std::pair<std::uintptr_t, std::size_t>> extents;
  index.for_each_extent([&](std::uintptr_t address, std::size_t bytes) { extents.emplace_back(address, bytes); });
  CHECK(extents == std::vector<std::pair<std::uintptr_t, std::size_t>>{{0x10000, 4096}, {0x11000, 512}, {0x11600, 1536}});
}

TEST_CASE("page map: live bytes, cached free pages, runs", "[page_map]") {
  const std::size_t page = 2 << 20;
  page_map pages(0x100000000ull, 8, page);
  pages.set_mapped(1, 11);
  pages.set_mapped(2, 12);
  CHECK(pages.mapped_run_count() == 1);
  pages.set_mapped(4, 14);
  CHECK(pages.mapped_run_count() == 2);
  CHECK(pages.cached_free_pages().size() == 3);
  // A block straddling pages 1 and 2.
  const std::uintptr_t address = pages.page_address(1) + page - 4096;
  pages.add_live(address, 8192);
  CHECK(pages.live_bytes(1) == 4096);
  CHECK(pages.live_bytes(2) == 4096);
  CHECK(pages.cached_free_pages().size() == 1);
  pages.remove_live(address, 4096);
  CHECK(pages.cached_free_pages().contains(1));
  CHECK_FALSE(pages.cached_free_pages().contains(2));
  CHECK(pages.set_unmapped(4) == 14);
  CHECK(pages.mapped_run_count() == 1);
  pages.set_mapped(3, 13);
  pages.set_mapped(4, 14);
  CHECK(pages.mapped_run_count() == 1);
  pages.remove_live(address + 4096, 4096);
  CHECK(pages.set_unmapped(2) == 12);  // splits the run 1..4
  CHECK(pages.mapped_run_count() == 2);
  CHECK(pages.mapped_bytes() == 3 * page);
}

// Note [Whole pages]: the page map against a per-page model -- live bytes and the epoch a
// page last became free, kept page by page -- over random blocks that cover pages whole,
// in part and both, frees and epoch advances (whole pages go through the bitmaps, partial
// ones through the arrays, and advance_epoch writes the bitmap's epochs into the array).
TEST_CASE("page map agrees with a per-page model of live bytes and free epochs", "[page_map]") {
  const std::size_t page = 2 << 20;
  const std::size_t page_count = 200;
  std::mt19937_64 random(11);
  for (int round = 0; round < 20; ++round) {
    page_map pages(0x100000000ull, page_count, page);
    for (std::size_t first = 0; first < page_count;) {  // chunks of 1 to 4 pages
      const std::size_t count = std::min<std::size_t>(1 + random() % 4, page_count - first);
      pages.set_mapped(first, count, 100 + first);
      first += count;
    }
    std::vector<std::size_t> live(page_count, 0);
    std::vector<std::uint32_t> free_epoch(page_count, 0);
    std::uint32_t epoch = 0;
    std::map<std::uintptr_t, std::size_t> blocks;  // offset -> bytes
    const auto overlaps = [&](std::uintptr_t offset, std::size_t bytes) {
      auto next = blocks.lower_bound(offset);
      if (next != blocks.end() && next->first < offset + bytes) return true;
      return next != blocks.begin() && std::prev(next)->first + std::prev(next)->second > offset;
    };
    const auto apply = [&](std::uintptr_t offset, std::size_t bytes, bool adding) {
      for (std::size_t p = offset / page; p < (offset + bytes + page - 1) / page; ++p) {
        const std::size_t lo = std::max<std::size_t>(offset, p * page), hi = std::min<std::size_t>(offset + bytes, (p + 1) * page);
        live[p] = adding ? live[p] + (hi - lo) : live[p] - (hi - lo);
        if (!adding && live[p] == 0) free_epoch[p] = epoch;
      }
    };
    for (int step = 0; step < 400; ++step) {
      const auto choice = random() % 10;
      if (choice == 0) {
        pages.advance_epoch();
        ++epoch;
      } else if (choice < 5 && !blocks.empty()) {
        auto at = blocks.begin();
        std::advance(at, static_cast<std::ptrdiff_t>(random() % blocks.size()));
        pages.remove_live(0x100000000ull + at->first, at->second);
        apply(at->first, at->second, false);
        blocks.erase(at);
      } else {
        const std::size_t bytes = 512 * (1 + random() % (random() % 2 == 0 ? 8 : 8 * page / 512));
        const std::uintptr_t offset = 512 * (random() % ((page_count * page - bytes) / 512));
        if (overlaps(offset, bytes)) continue;
        pages.add_live(0x100000000ull + offset, bytes);
        apply(offset, bytes, true);
        blocks.emplace(offset, bytes);
      }
      for (std::size_t p = 0; p < page_count; ++p) {
        REQUIRE(pages.live_bytes(p) == live[p]);
        REQUIRE(pages.cached_free_pages().contains(p) == (live[p] == 0));
        if (live[p] == 0) REQUIRE(pages.free_since_epoch(p) == free_epoch[p]);
      }
      for (std::size_t head = 0; head < page_count; head += pages.chunk_pages(head)) {
        bool all_free = true;
        for (std::size_t p = head; p < head + pages.chunk_pages(head); ++p) all_free = all_free && live[p] == 0;
        REQUIRE(pages.chunk_free(head) == all_free);
      }
    }
  }
}

// Against a std::map from stream to its latest free tick (Note [Standing waits]): inserts
// keep the larger tick, merges take each stream's larger tick, renames and stamps keep
// the set's order.
// Note [Window positions]: the loop plan's flat table against std::unordered_map over
// random hashes -- spread, alike in their low bits, alike in their high bits, and a few
// repeated often -- through growth and clears.
TEST_CASE("window positions answer as a hash map does", "[window_positions]") {
  using fragless::core::window_positions;
  std::mt19937_64 random(11);
  window_positions table;
  std::unordered_map<std::uint64_t, std::size_t> model;
  for (int round = 0; round < 6; ++round) {
    const int count = 1 + static_cast<int>(random() % 20000);
    for (int i = 0; i < count; ++i) {
      std::uint64_t hash = random();
      switch (random() % 4) {
        case 0: hash &= 0xfff; break;                      // alike in the high bits
        case 1: hash = (hash & 0xfff) << 52; break;        // alike in the low bits
        case 2: hash = random() % 16; break;               // a few, often (0 among them)
        default: break;
      }
      const std::size_t position = static_cast<std::size_t>(random() % 1000000);
      const std::optional<std::size_t> got = table.exchange(hash, position);
      auto [at, fresh] = model.try_emplace(hash, position);
      if (fresh) {
        REQUIRE_FALSE(got.has_value());
      } else {
        REQUIRE(got.has_value());
        REQUIRE(*got == at->second);
        at->second = position;
      }
      REQUIRE(table.size() == model.size());
    }
    if (round % 2 == 1) {
      table.clear();
      model.clear();
      REQUIRE(table.size() == 0);
    }
  }
}

TEST_CASE("stream sets stay sorted and unique, inline and overflowing", "[stream_set]") {
  using fragless::core::stream_set;
  std::mt19937_64 random(7);
  const auto check_against = [](const stream_set& set, const std::map<std::uintptr_t, std::uint64_t>& expected) {
    REQUIRE(set.size() == expected.size());
    REQUIRE(set.entries().size() == expected.size());
    std::map<std::uintptr_t, std::uint64_t> got;
    std::vector<std::uintptr_t> order;
    for (const auto& each : set.entries()) {
      const auto value = reinterpret_cast<std::uintptr_t>(each.stream);
      order.push_back(value);
      got[value] = each.freed_at_tick;
    }
    REQUIRE(std::is_sorted(order.begin(), order.end()));
    REQUIRE(got == expected);
  };
  for (int round = 0; round < 400; ++round) {
    stream_set set;
    std::map<std::uintptr_t, std::uint64_t> expected;
    // Up to 7 streams: inline (up to 4, Note [Inline streams]) and overflowing.
    const int count = static_cast<int>(random() % 10);
    for (int i = 0; i < count; ++i) {
      const std::uintptr_t value = 1 + random() % 7;
      const std::uint64_t tick = random() % 4 == 0 ? stream_set::kUnknownTick : random() % 100;
      set.insert(reinterpret_cast<void*>(value), tick);
      auto [at, fresh] = expected.emplace(value, tick);
      if (!fresh) at->second = std::max(at->second, tick);
    }
    check_against(set, expected);
    {  // a copy is equal; a set moved from is empty, and usable again
      stream_set copy = set;
      check_against(copy, expected);
      stream_set moved = std::move(copy);
      check_against(moved, expected);
      REQUIRE(copy.empty());
      REQUIRE(copy.entries().empty());
      copy.insert(reinterpret_cast<void*>(3), 5);
      REQUIRE(copy.size() == 1);
      copy = std::move(moved);
      check_against(copy, expected);
      REQUIRE(moved.empty());
    }
    for (std::uintptr_t value = 0; value < 9; ++value)
      REQUIRE(set.contains(reinterpret_cast<void*>(value)) == (expected.count(value) == 1));
    REQUIRE(set.foreign_to(reinterpret_cast<void*>(1)) == !(expected.empty() || (expected.size() == 1 && expected.count(1) == 1)));

    // Merges into a set of 0-8 other streams, with and without a skipped stream (a
    // waiter's own, Note [Transitive waits]): the merged set against the two maps joined.
    for (const bool skipping : {false, true}) {
      stream_set other;
      std::map<std::uintptr_t, std::uint64_t> merged;
      const int other_count = static_cast<int>(random() % 10);
      for (int i = 0; i < other_count; ++i) {
        const std::uintptr_t value = 1 + random() % 8;
        const std::uint64_t tick = random() % 100;
        other.insert(reinterpret_cast<void*>(value), tick);
        auto [at, fresh] = merged.emplace(value, tick);
        if (!fresh) at->second = std::max(at->second, tick);
      }
      const std::uintptr_t skipped = 1 + random() % 8;
      if (skipping) {
        other.merge_except(set, reinterpret_cast<void*>(skipped));
      } else {
        other.merge(set);
      }
      for (const auto& [value, tick] : expected) {
        if (skipping && value == skipped) continue;
        auto [at, fresh] = merged.emplace(value, tick);
        if (!fresh) at->second = std::max(at->second, tick);
      }
      check_against(other, merged);
      other.merge(other);  // with itself: nothing changes
      check_against(other, merged);
    }

    const std::uintptr_t from = 1 + random() % 7;
    const std::uintptr_t to = 1 + random() % 9;
    const bool renamed = set.rename(reinterpret_cast<void*>(from), reinterpret_cast<void*>(to));
    REQUIRE(renamed == (expected.count(from) == 1));
    if (renamed) {
      const std::uint64_t tick = expected[from];
      expected.erase(from);
      auto [into, added] = expected.emplace(to, tick);
      if (!added) into->second = std::max(into->second, tick);
    }
    check_against(set, expected);

    set.stamp(1000 + round);
    for (auto& [value, tick] : expected) tick = 1000 + round;
    check_against(set, expected);

    // tick_of and erase (a stream's standing waits, Note [Transitive waits]).
    for (std::uintptr_t value = 0; value < 10; ++value) {
      const auto found = expected.find(value);
      REQUIRE(set.tick_of(reinterpret_cast<void*>(value), 7) == (found == expected.end() ? 7 : found->second));
    }
    const std::uintptr_t gone = random() % 10;
    set.erase(reinterpret_cast<void*>(gone));
    expected.erase(gone);
    check_against(set, expected);
    for (auto& [value, tick] : expected) set.erase(reinterpret_cast<void*>(value));
    REQUIRE(set.empty());
  }
}

// page_set against std::set, the container it replaced: random inserts and erases, of
// single pages and of ranges, ranges moved to and from two other sets (move_range), over sizes around the word (64) and summary (4096)
// boundaries, dense and sparse; after each batch, size, membership, the whole descending walk by highest_below and the
// ascending list append_members gives must agree, and
// highest_below from random limits must be the set's predecessor.
TEST_CASE("page set agrees with std::set on random operations and range queries", "[page_set]") {
  std::mt19937_64 random(20261124);
  for (std::size_t page_count : {1u, 63u, 64u, 65u, 4095u, 4096u, 4097u, 20000u}) {
    for (int density : {2, 50, 1000}) {
      INFO("pages " << page_count << ", 1 in " << density);
      page_set set(page_count);
      std::set<std::size_t> oracle;
      // move_range's other ends: pages leave `set` for `other` (and `also`), and come back.
      page_set other(page_count), also(page_count);
      std::set<std::size_t> other_oracle, also_oracle;
      std::uniform_int_distribution<std::size_t> any_page(0, page_count - 1);
      for (int batch = 0; batch < fragless::testing::for_build(8); ++batch) {  // Note [Sanitizer scale]
        for (std::size_t operation = 0; operation < page_count * 2 / static_cast<std::size_t>(density) + 3; ++operation) {
          const std::size_t page = any_page(random);
          const std::size_t kind = random() % 10;
          if (kind >= 8) {  // pages moved out of one set into one or two others, or back
            const std::size_t end = std::min(page_count, page + 1 + random() % (random() % 2 ? 70 : 5000));
            const bool out = kind == 8;
            const bool with_also = out && random() % 2 == 0;
            page_set::move_range(out ? set : other, out ? other : set, with_also ? &also : nullptr, page, end);
            std::set<std::size_t>& from = out ? oracle : other_oracle;
            std::set<std::size_t>& to = out ? other_oracle : oracle;
            from.erase(from.lower_bound(page), from.lower_bound(end));
            for (std::size_t member = page; member < end; ++member) {
              to.insert(member);
              if (with_also) also_oracle.insert(member);
            }
          } else if (kind >= 6) {  // a range, often across word and summary boundaries
            const std::size_t end = std::min(page_count, page + 1 + random() % (random() % 2 ? 70 : 5000));
            if (kind == 6) {
              set.insert_range(page, end);
              for (std::size_t member = page; member < end; ++member) oracle.insert(member);
            } else {
              set.erase_range(page, end);
              oracle.erase(oracle.lower_bound(page), oracle.lower_bound(end));
            }
          } else if (kind % 3 != 0) {
            set.insert(page);
            oracle.insert(page);
          } else {
            set.erase(page);
            oracle.erase(page);
          }
        }
        REQUIRE(set.size() == oracle.size());
        REQUIRE(set.empty() == oracle.empty());
        for (auto [moved, moved_oracle] : {std::pair<page_set*, std::set<std::size_t>*>{&other, &other_oracle},
                                           std::pair<page_set*, std::set<std::size_t>*>{&also, &also_oracle}}) {
          REQUIRE(moved->size() == moved_oracle->size());
          std::vector<std::size_t> members;
          moved->append_members(members);
          REQUIRE(members == std::vector<std::size_t>(moved_oracle->begin(), moved_oracle->end()));
        }
        std::vector<std::size_t> walked;
        for (std::size_t page = set.highest_below(page_set::npos); page != page_set::npos;
             page = set.highest_below(page))
          walked.push_back(page);
        REQUIRE(walked == std::vector<std::size_t>(oracle.rbegin(), oracle.rend()));
        std::vector<std::size_t> members_ascending = {page_set::npos};  // appended after what is there
        set.append_members(members_ascending);
        members_ascending.erase(members_ascending.begin());
        REQUIRE(members_ascending == std::vector<std::size_t>(oracle.begin(), oracle.end()));
        for (int probe = 0; probe < 64; ++probe) {
          const std::size_t limit = random() % (page_count + 2);
          auto at = oracle.lower_bound(limit);
          const std::size_t expected = at == oracle.begin() ? page_set::npos : *std::prev(at);
          REQUIRE(set.highest_below(limit) == expected);
          if (limit < page_count) REQUIRE(set.contains(limit) == (oracle.count(limit) == 1));
          // count_in / first_absent over [first, end), often across word boundaries.
          const std::size_t first = random() % (page_count + 1);
          const std::size_t end = std::min(page_count, first + random() % (random() % 2 ? 70 : 5000));
          std::size_t members = 0;
          std::size_t absent = end;
          for (std::size_t page = first; page < end; ++page) {
            if (oracle.count(page) == 1) ++members;
            else if (absent == end) absent = page;
          }
          REQUIRE(set.count_in(first, end) == members);
          REQUIRE(set.first_absent(first, end) == absent);
          const auto member = oracle.lower_bound(first);
          REQUIRE(set.first_member(first, end) == (member == oracle.end() || *member >= end ? end : *member));
          REQUIRE(set.first_member(first, page_count) == (member == oracle.end() ? page_count : *member));
        }
      }
    }
  }
}
