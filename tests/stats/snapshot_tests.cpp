// The snapshot model: well-formedness checks, the stats walker on hand-built snapshots,
// JSON round trip, and the PyTorch pickle read back by the data-only pickle reader.
#include <catch2/catch.hpp>

#include "fragless/stats_snapshot.hpp"

#include "pickle_reader.hpp"

using namespace fragless;

namespace {

constexpr std::uint64_t MiB = 1 << 20;

// Device 0: a 2 MiB small segment split in four; a 20 MiB large segment split in three;
// a 64 MiB unsplit free large segment. Device 1: one allocated 8 MiB segment.
memory_snapshot hand_built() {
  memory_snapshot s;
  s.device_count = 2;
  s.max_split_size = 32 * MiB;
  const std::uint64_t a = 0x7f0000000000;
  s.segments.push_back({0, a, 2 * MiB, 0, pool_small, false,
                        {{a, 512 * 1024, 500 * 1024, block_state::allocated},
                         {a + 512 * 1024, 512 * 1024, 0, block_state::free},
                         {a + 1 * MiB, 512 * 1024, 0, block_state::pending_free},
                         {a + 1536 * 1024, 512 * 1024, 512 * 1024, block_state::allocated}}});
  const std::uint64_t b = 0x7f0010000000;
  s.segments.push_back({0, b, 20 * MiB, 7, pool_large, false,
                        {{b, 4 * MiB, 0, block_state::free},
                         {b + 4 * MiB, 10 * MiB, 9 * MiB, block_state::allocated},
                         {b + 14 * MiB, 6 * MiB, 0, block_state::free}}});
  const std::uint64_t c = 0x7f0020000000;
  s.segments.push_back({0, c, 64 * MiB, 0, pool_large, true, {{c, 64 * MiB, 0, block_state::free}}, 3});  // pool 3
  const std::uint64_t d = 0x7f1000000000;
  s.segments.push_back({1, d, 8 * MiB, 0, pool_large, false, {{d, 8 * MiB, 8 * MiB, block_state::allocated}}});
  return s;
}

}  // namespace

TEST_CASE("a hand-built snapshot is well formed; broken ones are reported") {
  memory_snapshot s = hand_built();
  CHECK(check_snapshot(s).empty());

  memory_snapshot gap = s;
  gap.segments[1].blocks.erase(gap.segments[1].blocks.begin() + 1);
  CHECK(check_snapshot(gap).size() == 1);

  memory_snapshot short_cover = s;
  short_cover.segments[2].blocks[0].size_bytes -= 512;
  CHECK(check_snapshot(short_cover).size() == 1);

  memory_snapshot overlap = s;
  overlap.segments[2].address = overlap.segments[1].address + MiB;
  overlap.segments[2].blocks[0].address = overlap.segments[2].address;
  const auto problems = check_snapshot(overlap);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("overlap") != std::string::npos);

  memory_snapshot bad_device = s;
  bad_device.segments[3].device = 2;
  bad_device.segments[3].blocks[0].requested_bytes = 9 * MiB;
  CHECK(check_snapshot(bad_device).size() == 2);
}

TEST_CASE("the walker computes every current stat the snapshot implies") {
  const device_stats stats = stats_from_snapshot(hand_built(), 0);
  CHECK(stats.segment[pool_all].current == 3);
  CHECK(stats.segment[pool_small].current == 1);
  CHECK(stats.reserved_bytes[pool_all].current == static_cast<std::int64_t>(86 * MiB));
  CHECK(stats.reserved_bytes[pool_small].current == static_cast<std::int64_t>(2 * MiB));
  CHECK(stats.allocation[pool_all].current == 3);
  CHECK(stats.allocation[pool_small].current == 2);
  CHECK(stats.allocated_bytes[pool_all].current == static_cast<std::int64_t>(11 * MiB));
  CHECK(stats.requested_bytes[pool_small].current == static_cast<std::int64_t>(1012 * 1024));
  CHECK(stats.requested_bytes[pool_large].current == static_cast<std::int64_t>(9 * MiB));
  CHECK(stats.active[pool_all].current == 4);
  CHECK(stats.active_bytes[pool_small].current == static_cast<std::int64_t>(1536 * 1024));
  // Free blocks of split segments: one small (512 KiB), two large (4 + 6 MiB); the unsplit
  // 64 MiB segment is releasable, so not counted.
  CHECK(stats.inactive_split[pool_all].current == 3);
  CHECK(stats.inactive_split_bytes[pool_large].current == static_cast<std::int64_t>(10 * MiB));
  CHECK(stats.inactive_split_bytes[pool_small].current == static_cast<std::int64_t>(512 * 1024));
  CHECK(stats.oversize_segments.current == 1);  // the 64 MiB one (>= 32 MiB)
  CHECK(stats.oversize_allocations.current == 0);
  CHECK(stats.largest_free_block_bytes == static_cast<std::int64_t>(64 * MiB));
  CHECK(stats.max_split_size == static_cast<std::int64_t>(32 * MiB));
  for (const stat& s : stats.allocated_bytes) CHECK(s.current == s.allocated - s.freed);

  const device_stats other = stats_from_snapshot(hand_built(), 1);
  CHECK(other.allocated_bytes[pool_large].current == static_cast<std::int64_t>(8 * MiB));
  CHECK(other.largest_free_block_bytes == 0);
}

TEST_CASE("compare_current names the keys that differ") {
  const device_stats walked = stats_from_snapshot(hand_built(), 0);
  device_stats live = walked;
  live.allocated_bytes[pool_all].peak += 1000;  // history: not compared
  live.num_map = 12;                            // counters: not compared
  CHECK(compare_current(walked, live).empty());
  live.allocated_bytes[pool_small].current += 512;
  live.largest_free_block_bytes = 1;
  const auto differences = compare_current(walked, live);
  REQUIRE(differences.size() == 2);
  CHECK(differences[0].rfind("allocated_bytes.small_pool.current", 0) == 0);
  CHECK(compare_current(walked, live, false).size() == 1);
}

TEST_CASE("snapshot JSON round trip and rejection of bad documents") {
  memory_snapshot s = hand_built();
  s.settings = "backend:vmm,max_split_bytes:32MiB";
  memory_snapshot back;
  std::string error;
  REQUIRE(snapshot_from_json(to_json(s), back, error));
  CHECK(back == s);

  CHECK_FALSE(snapshot_from_json(R"({"schema":"fragless.stats/1","segments":[]})", back, error));
  CHECK_FALSE(snapshot_from_json(R"({"schema":"fragless.snapshot/1"})", back, error));
  CHECK_FALSE(snapshot_from_json(
      R"({"schema":"fragless.snapshot/1","segments":[{"device":0,"address":1,"size":2,"pool":"medium","blocks":[]}]})",
      back, error));
  CHECK(error.find("pool") != std::string::npos);
  CHECK_FALSE(snapshot_from_json(
      R"({"schema":"fragless.snapshot/1","segments":[{"device":0,"address":-1,"size":2,"pool":"small","blocks":[]}]})",
      back, error));
  CHECK_FALSE(snapshot_from_json(
      R"({"schema":"fragless.snapshot/1","segments":[{"device":0,"address":1,"size":2,"pool":"small","blocks":[{"address":1,"size":2,"state":"gone"}]}]})",
      back, error));
  std::string truncated = to_json(s);
  truncated.resize(truncated.size() / 2);
  CHECK_FALSE(snapshot_from_json(truncated, back, error));
}

TEST_CASE("the PyTorch pickle reads back with torch's keys and our values") {
  memory_snapshot s = hand_built();
  s.segments[0].address = 0xffff000000000000ull;  // needs an unsigned 9-byte LONG1
  for (auto& block : s.segments[0].blocks) block.address += 0xffff000000000000ull - 0x7f0000000000ull;
  const std::string bytes = to_pytorch_pickle(s);
  const traces::pickle_document document = traces::read_pickle(bytes);
  const traces::pickle_value& root = document.root();
  REQUIRE(root.is_dict());
  const traces::pickle_value* segments = root.find("segments");
  REQUIRE(segments != nullptr);
  REQUIRE(segments->items().size() == s.segments.size());
  const traces::pickle_value* traces_list = root.find("device_traces");
  REQUIRE(traces_list != nullptr);
  CHECK(traces_list->items().size() == 2);
  const traces::pickle_value& second = segments->items()[1];
  CHECK(second.find("total_size")->int_value == static_cast<std::int64_t>(20 * MiB));
  CHECK(second.find("allocated_size")->int_value == static_cast<std::int64_t>(10 * MiB));
  CHECK(second.find("requested_size")->int_value == static_cast<std::int64_t>(9 * MiB));
  CHECK(second.find("stream")->int_value == 7);
  CHECK(second.find("segment_type")->text == "large");
  const auto& blocks = second.find("blocks")->items();
  REQUIRE(blocks.size() == 3);
  CHECK(blocks[1].find("state")->text == "active_allocated");
  CHECK(blocks[0].find("state")->text == "inactive");
  const traces::pickle_value& first = segments->items()[0];
  const traces::pickle_value* address = first.find("address");
  REQUIRE(address != nullptr);
  CHECK(address->type == traces::pickle_value::kind::big_integer);
  CHECK(first.find("blocks")->items()[2].find("state")->text == "active_pending_free");
}
