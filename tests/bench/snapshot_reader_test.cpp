// Tests of the snapshot reader's replay semantics (Note [Snapshot replay]) on a hand-built
// snapshot whose every figure is worked out by hand, and of its refusals.
#include <catch2/catch.hpp>

#include "pickle_samples.hpp"
#include "replay/ideal.hpp"
#include "traces/snapshot_reader.hpp"

using namespace fragless::traces;

TEST_CASE("snapshot seeding, event order, streams and the recorded curve", "[bench][snapshot]") {
  snapshot_facts facts;
  const trace t = read_snapshot(pickle_samples::tiny_snapshot, "tiny", &facts);
  CHECK(facts.device == 0);  // two allocations on device 0, one on device 1
  CHECK(facts.other_device_events == 1);
  REQUIRE(t.seeded_block_count == 2);
  REQUIRE(t.events.size() == 6);
  // Seeds in address order: rule 2 (active in segments, no live trace alloc) then rule 1
  // (first event at the address is a free).
  CHECK(t.events[0].op == trace_op::alloc);
  CHECK(t.events[0].size_bytes == 1000000);
  CHECK(t.events[1].size_bytes == 1048576);
  CHECK(t.events[2].op == trace_op::free);
  CHECK(t.events[2].block_id == t.events[1].block_id);
  CHECK(t.events[3].size_bytes == 4194304);
  CHECK(t.events[4].size_bytes == 512);
  CHECK(t.events[4].stream_index == 1);  // raw stream 7 is the trace's second stream
  CHECK(t.events[5].op == trace_op::free);
  CHECK(t.events[5].stream_index == 1);
  CHECK(t.stream_count == 2);
  CHECK(facts.seeding_consistent);
  CHECK(facts.dump_live_bytes == 1000000 + 4194304);
  CHECK(facts.dump_reserved_bytes == 20 * 1048576);
  // Native reserved rebuilt backwards from 20 MiB: +2 MiB at the segment_alloc, back at the free.
  REQUIRE(t.recorded_reserved.size() == 3);
  CHECK(t.recorded_reserved[0].after_event == 1);
  CHECK(t.recorded_reserved[0].bytes == 20 * 1048576);
  CHECK(t.recorded_reserved[1].after_event == 2);
  CHECK(t.recorded_reserved[1].bytes == 22 * 1048576);
  CHECK(t.recorded_reserved[2].after_event == 5);
  CHECK(t.recorded_reserved[2].bytes == 20 * 1048576);
  CHECK(t.recorded_segment_allocs == 1);
  CHECK(t.recorded_segment_frees == 1);
}

TEST_CASE("ideal of the hand snapshot", "[bench][ideal]") {
  const trace t = read_snapshot(pickle_samples::tiny_snapshot, "tiny");
  const auto ideal = fragless::bench::compute_ideal(t);
  // 1000000 -> 1000448 (512 B rounding) + 4194304 + 512 live at the peak.
  CHECK(ideal.peak_live_rounded_bytes == 1000448 + 4194304 + 512);
  CHECK(ideal.peak_live_bytes == 1000000 + 4194304 + 512);
  CHECK(ideal.ideal_bytes == 6 * 1048576);
  CHECK(ideal.peak_event == 4);
}

TEST_CASE("bad snapshots fail with the file and the event position", "[bench][snapshot]") {
  auto message_of = [](std::string_view bytes) {
    try {
      (void)read_snapshot(bytes, "bad.pickle");
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string double_free = message_of(pickle_samples::double_free_snapshot);
  CHECK(double_free.find("bad.pickle: device_traces[0][8]: free of unknown address 0x2000000") != std::string::npos);
  const std::string double_alloc = message_of(pickle_samples::double_alloc_snapshot);
  CHECK(double_alloc.find("device_traces[0][4]: allocation at 0x1200000 which is already live") != std::string::npos);
  const std::string negative = message_of(pickle_samples::negative_size_snapshot);
  CHECK(negative.find("device_traces[0][3]: field 'size' is negative") != std::string::npos);
  const std::string class_reference = message_of(pickle_samples::class_reference);
  CHECK(class_reference.find("bad.pickle: forbidden opcode STACK_GLOBAL") != std::string::npos);
  CHECK(message_of(pickle_samples::simple_protocol_4).find("no 'segments' list") != std::string::npos);
}
