// Tests of the RMM and lifetime CSV readers, the text trace format and the converter's
// round trip (snapshot, CSV and built-in workloads to text and back).
#include <catch2/catch.hpp>

#include "pickle_samples.hpp"
#include "traces/csv_readers.hpp"
#include "traces/snapshot_reader.hpp"
#include "traces/text_trace.hpp"
#include "workloads/workload.hpp"

using namespace fragless::traces;

namespace {
std::string error_of(const std::function<void()>& read) {
  try {
    read();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

void require_same(const trace& a, const trace& b) {
  REQUIRE(a.events.size() == b.events.size());
  for (std::size_t i = 0; i < a.events.size(); ++i) {
    INFO("event " << i);
    REQUIRE(a.events[i].op == b.events[i].op);
    REQUIRE(a.events[i].block_id == b.events[i].block_id);
    REQUIRE(a.events[i].size_bytes == b.events[i].size_bytes);
    REQUIRE(a.events[i].stream_index == b.events[i].stream_index);
  }
  CHECK(a.seeded_block_count == b.seeded_block_count);
  CHECK(a.stream_count == b.stream_count);
  CHECK(a.notes == b.notes);
  CHECK(a.name == b.name);
  CHECK(a.recorded_segment_allocs == b.recorded_segment_allocs);
  REQUIRE(a.recorded_reserved.size() == b.recorded_reserved.size());
  for (std::size_t i = 0; i < a.recorded_reserved.size(); ++i) {
    CHECK(a.recorded_reserved[i].after_event == b.recorded_reserved[i].after_event);
    CHECK(a.recorded_reserved[i].bytes == b.recorded_reserved[i].bytes);
  }
}
}  // namespace

TEST_CASE("RMM log CSV: columns by name, streams, failures noted", "[bench][csv]") {
  const std::string log =
      "Thread,Time,Action,Pointer,Size,Stream\n"
      "1,0.1,allocate,0x7f0000000000,1000,0x0\n"
      "1,0.2,allocate,0x7f0000100000,2048,0x5\n"
      "1,0.3,allocate failure,0x0,99999999999,0x0\n"
      "1,0.4,free,0x7f0000000000,1000,0x0\n"
      "1,0.5,allocate,0x7f0000000000,64,0x0\n";
  const trace t = read_rmm_csv(log, "log.csv");
  REQUIRE(t.events.size() == 4);
  CHECK(t.events[1].stream_index == 1);
  CHECK(t.events[2].op == trace_op::free);
  CHECK(t.events[2].block_id == t.events[0].block_id);
  CHECK(t.events[3].block_id != t.events[0].block_id);  // a new block at a reused address
  CHECK(t.stream_count == 2);
  REQUIRE(t.notes.size() == 1);
  CHECK(t.notes[0].find("1 'allocate failure'") != std::string::npos);
}

TEST_CASE("RMM log CSV errors name file, line and column", "[bench][csv]") {
  CHECK(error_of([] { read_rmm_csv("Thread,Time,Action,Pointer,Stream\n", "a.csv"); }) ==
        "a.csv:1: missing column 'Size' in header 'Thread,Time,Action,Pointer,Stream'");
  CHECK(error_of([] { read_rmm_csv("Action,Pointer,Size,Stream\nallocate,0x10,12x,0\n", "b.csv"); })
            .find("b.csv:2: column 'Size'") != std::string::npos);
  CHECK(error_of([] { read_rmm_csv("Action,Pointer,Size,Stream\nfree,0x10,1,0\n", "c.csv"); }) ==
        "c.csv:2: free of unknown address 0x10");
  CHECK(error_of([] { read_rmm_csv("Action,Pointer,Size,Stream\nallocate,0x10,1,0\nallocate,0x10,1,0\n", "d.csv"); }) ==
        "d.csv:3: allocation at 0x10 which is already live");
  CHECK(error_of([] { read_rmm_csv("Action,Pointer,Size,Stream\nallocate,0x10,0,0\n", "e.csv"); })
            .find("e.csv:2: absurd allocation size 0") != std::string::npos);
  CHECK(error_of([] { read_rmm_csv("", "f.csv"); }) == "f.csv:1: empty file (no header)");
  CHECK(error_of([] { read_rmm_csv("Action,Pointer,Size,Stream\nallocate,0x10\n", "g.csv"); })
            .find("g.csv:2: expected at least 4 fields") != std::string::npos);
}

TEST_CASE("lifetime CSV: [lower, upper), frees before allocations at equal times", "[bench][csv]") {
  const std::string csv =
      "id,lower,upper,size\n"
      "a,0,2,100\n"
      "b,2,4,200\n"
      "c,1,3,300\n";
  const trace t = read_lifetime_csv(csv, "l.csv");
  REQUIRE(t.events.size() == 6);
  // t=0 alloc a; t=1 alloc c; t=2 free a then alloc b; t=3 free c; t=4 free b.
  CHECK((t.events[0].op == trace_op::alloc && t.events[0].size_bytes == 100));
  CHECK((t.events[1].op == trace_op::alloc && t.events[1].size_bytes == 300));
  CHECK((t.events[2].op == trace_op::free && t.events[2].size_bytes == 100));
  CHECK((t.events[3].op == trace_op::alloc && t.events[3].size_bytes == 200));
  CHECK((t.events[4].op == trace_op::free && t.events[4].size_bytes == 300));
  CHECK((t.events[5].op == trace_op::free && t.events[5].size_bytes == 200));
  CHECK(error_of([] { read_lifetime_csv("id,lower,size\n", "m.csv"); }) ==
        "m.csv:1: missing column 'upper' in header 'id,lower,size'");
  CHECK(error_of([] { read_lifetime_csv("id,lower,upper,size\nx,5,1,10\n", "n.csv"); }) ==
        "n.csv:2: upper is before lower");
  CHECK(error_of([] { read_lifetime_csv("id,lower,upper,size\nx,0,1,-10\n", "o.csv"); })
            .find("o.csv:2: column 'size'") != std::string::npos);
}

TEST_CASE("text trace format: versioned, strict, documented errors", "[bench][text]") {
  const std::string text =
      "fragless-trace 1\n"
      "name hand\n"
      "streams 2\n"
      "s 7 100 0\n"
      "a 1 5000 1\n"
      "f 7\n"
      "a 7 64 0\n"
      "r 1 2097152\n";
  const trace t = read_text_trace(text, "hand.trace");
  CHECK(t.name == "hand");
  CHECK(t.seeded_block_count == 1);
  REQUIRE(t.events.size() == 4);
  CHECK(t.events[2].stream_index == 0);
  CHECK(t.events[2].size_bytes == 100);
  CHECK(error_of([] { read_text_trace("fragless-trace 2\n", "v.trace"); }) ==
        "v.trace:1: unsupported trace format version 2");
  CHECK(error_of([] { read_text_trace("hello\n", "w.trace"); }).find("w.trace:1: not a fragless trace") == 0);
  CHECK(error_of([] { read_text_trace("fragless-trace 1\nf 3\n", "x.trace"); }) == "x.trace:2: free of unknown block 3");
  CHECK(error_of([] { read_text_trace("fragless-trace 1\na 3 10 0\na 3 10 0\n", "y.trace"); }) ==
        "y.trace:3: block 3 allocated twice");
  CHECK(error_of([] { read_text_trace("fragless-trace 1\na 3 10 4\n", "z.trace"); }).find("z.trace:2: stream 4") == 0);
  CHECK(error_of([] { read_text_trace("", "e.trace"); }) == "e.trace:1: empty file");
}

TEST_CASE("converter round trip: snapshot, CSV and built-in workloads", "[bench][text]") {
  const trace snapshot = read_snapshot(pickle_samples::tiny_snapshot, "tiny");
  require_same(snapshot, read_text_trace(write_text_trace(snapshot), "ignored"));
  const trace csv = read_rmm_csv("Action,Pointer,Size,Stream\nallocate,0x10,5,3\nallocate,0x20,6,0\nfree,0x10,5,3\n", "r");
  require_same(csv, read_text_trace(write_text_trace(csv), "ignored"));
  for (const auto& spec : fragless::bench::default_workloads()) {
    auto small = spec;
    small.steps = 2;
    const trace workload = fragless::bench::generate_workload(small);
    require_same(workload, read_text_trace(write_text_trace(workload), "ignored"));
  }
}

TEST_CASE("format detection", "[bench][text]") {
  CHECK(detect_format(pickle_samples::tiny_snapshot) == input_format::pytorch_snapshot);
  CHECK(detect_format("Thread,Time,Action,Pointer,Size,Stream\n") == input_format::rmm_csv);
  CHECK(detect_format("id,lower,upper,size\n") == input_format::lifetime_csv);
  CHECK(detect_format("fragless-trace 1\n") == input_format::fragless_text);
  CHECK(detect_format("whatever\n") == input_format::unknown);
  CHECK(detect_format("") == input_format::unknown);
}
