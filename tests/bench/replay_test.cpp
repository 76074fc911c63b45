// Tests of the replay machinery: exact figures for the cudaMalloc peer on simcuda, the call
// log (Note [Call log]), the ideal on a hand trace, the overlap checker (direct and through a
// lying allocator), and the built-in workload generators.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "replay/call_log.hpp"
#include "replay/cuda_streams.hpp"
#include "replay/device_counters.hpp"
#include "replay/ideal.hpp"
#include "replay/live_block_checker.hpp"
#include "replay/replay_allocator.hpp"
#include "replay/replayer.hpp"
#include "traces/text_trace.hpp"
#include "workloads/workload.hpp"

using namespace fragless::bench;
using fragless::traces::read_text_trace;
using fragless::traces::trace;

namespace {

const char* const hand_trace =
    "fragless-trace 1\n"
    "streams 2\n"
    "a 0 1000 0\n"
    "a 1 3000 1\n"
    "f 0\n"
    "a 2 100 0\n"
    "f 1\n";

// Hands out the same address every time: the checker must catch it.
class lying_allocator final : public replay_allocator {
public:
  void* allocate(std::uint64_t, stream_handle) noexcept override { return reinterpret_cast<void*>(0x10000); }
  void deallocate(void*, std::uint64_t, stream_handle) noexcept override {}
  std::uint64_t reserved_bytes() noexcept override { return 0; }
  void release_cached() noexcept override {}
};

// Returns a bump pointer so blocks never overlap; counts calls.
class bump_allocator final : public replay_allocator {
public:
  void* allocate(std::uint64_t size, stream_handle) noexcept override {
    if (size > 1 << 20) return nullptr;  // "out of memory" for big blocks
    next_ += size + 512;
    ++allocs;
    return reinterpret_cast<void*>(next_ - size);
  }
  void deallocate(void*, std::uint64_t, stream_handle) noexcept override { ++frees; }
  std::uint64_t reserved_bytes() noexcept override { return next_ - 0x100000; }
  void release_cached() noexcept override { ++releases; }
  std::uint64_t next_ = 0x100000;
  int allocs = 0, frees = 0, releases = 0;
};

// A text trace replayed on simcuda's counters and streams, `repetitions` times a replay.
struct text_replay {
  trace t;
  device_counters counters;
  std::vector<stream_handle> streams;
  replay_options options;
  text_replay(const char* text, const char* name, int repetitions)
      : t(read_text_trace(text, name)), streams(create_replay_streams(t.stream_count)) {
    options.repetitions = repetitions;
  }
  ~text_replay() { destroy_replay_streams(streams); }
  replay_outcome run(replay_allocator& allocator) { return replay_trace(t, allocator, streams, options, counters); }
};

}  // namespace

TEST_CASE("cudaMalloc peer on a hand trace gives exact figures", "[bench][replay]") {
  const trace t = read_text_trace(hand_trace, "hand");
  device_counters counters;
  REQUIRE(counters.available());  // the test runs on simcuda
  peer_creation peer = create_peer("cudamalloc", "");
  REQUIRE(peer.allocator);
  const auto streams = create_replay_streams(t.stream_count);
  REQUIRE(streams.size() == 2);
  replay_options options;
  options.repetitions = 3;
  const replay_outcome o = replay_trace(t, *peer.allocator, streams, options, counters);
  destroy_replay_streams(streams);
  CHECK(o.status == "ok");
  // Reserved (512 B rounding): 1024, 1024 + 3072, 3072, 3072 + 512, 512.
  CHECK(o.peak_reserved_bytes == 4096);
  CHECK(o.reserved_minus_allocated_at_peak_bytes == 4096 - 4000);
  CHECK(o.peak_live_bytes == 4000);
  CHECK(o.ooms == 0);
  CHECK(o.calls.allocs == 3);  // three cudaMalloc
  CHECK(o.calls.frees == 2);   // two cudaFree within the trace (the last block is freed after)
  CHECK(o.calls.maps == 0);
  // Note [Steady state]: the last repetition's calls, all three blocks allocated and freed.
  CHECK(o.steady_calls == 6);
  CHECK(o.last_calling_pass == 3);  // it calls in every repetition
  CHECK(o.host_ns_per_op > 0);
  // Each repetition's calls, the free of the block left live at the trace's end included
  // (o.calls stops before it); host_ns_per_op is the median of the passes' times.
  CHECK(o.calls_by_pass == std::vector<std::uint64_t>{6, 6, 6});
  REQUIRE(o.host_ns_by_pass.size() == 3);
  std::vector<double> sorted = o.host_ns_by_pass;
  std::sort(sorted.begin(), sorted.end());
  CHECK(o.host_ns_per_op == sorted[1]);
  CHECK(o.events_replayed == 5);
  REQUIRE_FALSE(o.timeline.empty());
  CHECK(o.timeline.back().reserved_bytes == 512);
  CHECK(compute_ideal(t).ideal_bytes == 2 * 1048576);
  CHECK(compute_ideal(t).peak_live_rounded_bytes == 4096);
}

TEST_CASE("host time leaves out simcuda's emulation of priced calls and keeps their modelled cost",
          "[bench][replay]") {
  // Note [Host time without emulation]: the cudaMalloc peer only forwards to cudaMalloc and
  // cudaFree, so nearly all the time of its calls is simcuda's emulation (mmaps of 64 MiB).
  text_replay replay("fragless-trace 1\na 0 67108864 0\na 1 67108864 0\nf 0\na 2 67108864 0\nf 1\nf 2\n",
                     "emulated", 3);
  REQUIRE(replay.counters.simulated());
  peer_creation peer = create_peer("cudamalloc", "");
  REQUIRE(peer.allocator);
  const replay_outcome plain = replay.run(*peer.allocator);
  CHECK(plain.status == "ok");
  CHECK(plain.emulation_ns_per_op > 0);
  CHECK(plain.emulation_ns_per_op > plain.host_ns_per_op);
  // A modelled cost (--device-call-ns) is spent in the caller's time, not the emulation's:
  // three cudaMalloc and three cudaFree at 10 ms each over six calls -- far above what a
  // 64 MiB mapping takes to emulate even on a loaded machine (about a millisecond there).
  REQUIRE(replay.counters.set_call_cost_ns("cudaMalloc", 10'000'000));
  REQUIRE(replay.counters.set_call_cost_ns("cudaFree", 10'000'000));
  const replay_outcome costed = replay.run(*peer.allocator);
  CHECK(replay.counters.set_call_cost_ns("cudaMalloc", 0));
  CHECK(replay.counters.set_call_cost_ns("cudaFree", 0));
  CHECK(costed.status == "ok");
  CHECK(costed.host_ns_per_op >= 10'000'000);
  CHECK(costed.emulation_ns_per_op < 10'000'000);
}

TEST_CASE("steady-state calls per step: a caching allocator makes none once warm", "[bench][replay]") {
  // Two steps' worth of the same pattern; the whole trace is one step of Note [Steady state].
  text_replay replay(
      "fragless-trace 1\na 0 5000000 0\na 1 300000 0\na 2 9000000 0\nf 1\na 3 700000 0\nf 0\nf 2\nf 3\n", "steady", 3);
  REQUIRE(replay.counters.available());
  for (const char* name : {"fragless", "cudamalloc"}) {
    INFO(name);
    peer_creation peer = create_peer(name, "");
    REQUIRE(peer.allocator);
    const replay_outcome o = replay.run(*peer.allocator);
    CHECK(o.status == "ok");
    CHECK(o.calls.total() > 0);  // the first repetition obtains memory
    if (std::string(name) == "fragless") {
      CHECK(o.steady_calls == 0);
      CHECK(o.last_calling_pass == 1);  // warm from the second repetition on
    } else {
      CHECK(o.steady_calls == 8);  // four cudaMalloc and four cudaFree every step
      CHECK(o.last_calling_pass == 3);
    }
  }
  replay.options.repetitions = 1;
  peer_creation single = create_peer("cudamalloc", "");
  const replay_outcome once = replay.run(*single.allocator);
  CHECK(once.steady_calls == -1);
  CHECK(once.last_calling_pass == -1);
}

TEST_CASE("the cudaMalloc peer counts an OOM at the device capacity", "[bench][replay]") {
  device_counters counters;
  REQUIRE(counters.set_capacity(std::uint64_t{64} << 20));
  const trace t = read_text_trace("fragless-trace 1\na 0 50000000 0\na 1 50000000 0\nf 0\n", "oom");
  peer_creation peer = create_peer("cudamalloc", "");
  const auto streams = create_replay_streams(1);
  replay_options options;
  options.repetitions = 1;
  const replay_outcome o = replay_trace(t, *peer.allocator, streams, options, counters);
  CHECK(o.ooms == 1);
  CHECK(o.status == "ok");
  CHECK(o.peak_reserved_bytes == fragless::bench::round_up(50000000, 512));
  REQUIRE(counters.set_capacity(std::uint64_t{80} << 30));
}

TEST_CASE("ideal: 512 B rounding per block, 2 MiB rounding of the peak", "[bench][ideal]") {
  const trace t = read_text_trace("fragless-trace 1\na 0 1 0\na 1 513 0\nf 0\na 2 2097152 0\nf 1\nf 2\n", "i");
  const ideal_summary ideal = compute_ideal(t);
  CHECK(ideal.peak_live_rounded_bytes == 1024 + 2097152);
  CHECK(ideal.peak_live_bytes == 513 + 2097152);
  CHECK(ideal.ideal_bytes == 4 * 1048576);
  CHECK(ideal.peak_event == 3);
  CHECK(compute_ideal(t, 2).ideal_bytes == 2 * 1048576);  // event limit
}

TEST_CASE("overlap checker: disjoint blocks pass, any overlap is caught", "[bench][overlap]") {
  live_block_checker checker;
  CHECK(checker.insert(1000, 100));
  CHECK(checker.insert(1100, 50));  // touching is fine
  CHECK(checker.insert(900, 100));
  std::string conflict;
  CHECK_FALSE(checker.insert(1099, 2, &conflict));  // straddles two blocks
  CHECK(conflict.find("overlaps live block") != std::string::npos);
  CHECK_FALSE(checker.insert(950, 10));    // inside the previous block
  CHECK_FALSE(checker.insert(800, 1000));  // covers everything
  CHECK_FALSE(checker.insert(1149, 1));
  CHECK_FALSE(checker.insert(5, 0));  // empty block
  CHECK(checker.erase(1000));
  CHECK_FALSE(checker.erase(1000));
  CHECK(checker.insert(1000, 100));  // reusable after the erase
  CHECK(checker.live_count() == 3);
}

TEST_CASE("a replay with an allocator that hands out overlapping blocks fails loudly", "[bench][overlap]") {
  const trace t = read_text_trace(hand_trace, "hand");
  lying_allocator liar;
  device_counters counters;
  const replay_outcome o = replay_trace(t, liar, {nullptr, nullptr}, replay_options{}, counters);
  CHECK(o.status.rfind("overlap: event 1:", 0) == 0);
}

TEST_CASE("replayer skips the free of a failed allocation and cleans up between repetitions", "[bench][replay]") {
  const trace t = read_text_trace("fragless-trace 1\na 0 100 0\na 1 2000000 0\na 2 200 0\nf 1\nf 0\n", "r");
  bump_allocator bump;
  device_counters counters;
  replay_options options;
  options.repetitions = 2;
  const replay_outcome o = replay_trace(t, bump, {nullptr}, options, counters);
  CHECK(o.status == "ok");
  CHECK(o.ooms == 1);
  CHECK(o.first_failure.rfind("event 1", 0) == 0);
  CHECK(bump.allocs == 4);   // two good allocations per repetition
  CHECK(bump.frees == 4);    // block 0 in the trace, block 2 at the end, each repetition
  CHECK(bump.releases == 1);  // once, after the last repetition: later ones start warm
  CHECK(o.steady_calls == 0);  // the bump allocator makes no device call
  options.max_events = 1;
  CHECK(replay_trace(t, bump, {nullptr}, options, counters).events_replayed == 1);
}

TEST_CASE("built-in workloads are valid, deterministic, realistic in size, and seeded", "[bench][workloads]") {
  for (const workload_spec& spec : default_workloads()) {
    INFO(spec.kind);
    const trace a = generate_workload(spec);
    const trace b = generate_workload(parse_workload_spec(format_workload_spec(spec)));
    REQUIRE_NOTHROW(fragless::traces::validate_trace(a));
    REQUIRE(a.events.size() == b.events.size());
    bool same = true;
    for (std::size_t i = 0; i < a.events.size(); ++i) same = same && a.events[i].size_bytes == b.events[i].size_bytes;
    CHECK(same);
    const ideal_summary ideal = compute_ideal(a);
    CHECK(ideal.peak_live_bytes > (std::uint64_t{1} << 30));   // gigabytes, like real jobs
    CHECK(ideal.peak_live_bytes < (std::uint64_t{40} << 30));  // and fits one large GPU
    CHECK(a.events.size() > 1000);
    // A bigger batch needs more memory.
    workload_spec bigger = spec;
    bigger.batch *= 2;
    CHECK(compute_ideal(generate_workload(bigger)).peak_live_bytes > ideal.peak_live_bytes);
  }
  workload_spec reseeded = parse_workload_spec("transformer-training:seed=2");
  const trace one = generate_workload(parse_workload_spec("transformer-training"));
  const trace two = generate_workload(reseeded);
  CHECK(compute_ideal(one).peak_live_bytes != compute_ideal(two).peak_live_bytes);  // other sequence lengths
  CHECK_THROWS_AS(parse_workload_spec("transformer-training:batch=0"), std::invalid_argument);
  CHECK_THROWS_AS(parse_workload_spec("nope"), std::invalid_argument);
  CHECK_THROWS_AS(parse_workload_spec("cnn-training:depth=3"), std::invalid_argument);
}

TEST_CASE("call log: a row per event that called the device, summing to each pass's calls", "[bench][replay]") {
  // Block 3 is never freed: the replayer frees it at the end of each pass.
  text_replay replay("fragless-trace 1\na 0 5000000 0\na 1 300000 0\nf 0\na 2 9000000 0\na 3 700000 0\nf 1\nf 2\n",
                     "logged", 3);
  REQUIRE(replay.counters.available());
  const std::string path = "call_log_test.csv";
  for (const char* name : {"cudamalloc", "fragless"}) {
    INFO(name);
    peer_creation peer = create_peer(name, "");
    REQUIRE(peer.allocator);
    replay_outcome o;
    {
      call_log log;
      std::string error;
      REQUIRE(log.open(path, error));
      replay.options.log = &log;
      o = replay.run(*peer.allocator);
      replay.options.log = nullptr;
    }
    REQUIRE(o.status == "ok");
    std::ifstream in(path);
    std::string line;
    REQUIRE(std::getline(in, line));
    CHECK(line.rfind("pass,event,op,size_bytes,stream,reserved_bytes,live_bytes,allocs,frees,maps,unmaps,", 0) == 0);
    std::vector<std::uint64_t> calls_by_pass(3, 0);
    std::size_t rows = 0, pass_end_rows = 0;
    while (std::getline(in, line)) {
      std::vector<std::string> fields;
      std::stringstream split(line);
      for (std::string field; std::getline(split, field, ',');) fields.push_back(field);
      REQUIRE(fields.size() == 14);
      const int pass = std::stoi(fields[0]);
      REQUIRE(pass >= 1);
      REQUIRE(pass <= 3);
      std::uint64_t calls = 0;
      for (std::size_t column = 7; column <= 10; ++column) calls += std::stoull(fields[column]);
      std::uint64_t any = calls;
      for (std::size_t column = 11; column <= 13; ++column) any += std::stoull(fields[column]);
      CHECK(any > 0);  // only events that called the device
      calls_by_pass[static_cast<std::size_t>(pass - 1)] += calls;
      ++rows;
      if (fields[2] == "free-at-pass-end") {
        ++pass_end_rows;
        CHECK(fields[1] == "7");  // the trace's length
        CHECK(fields[3] == "700000");
        CHECK(fields[6] == "0");  // nothing live after it
      }
    }
    REQUIRE(o.calls_by_pass.size() == 3);
    for (std::size_t pass = 0; pass < 3; ++pass) CHECK(calls_by_pass[pass] == o.calls_by_pass[pass]);
    if (std::string(name) == "cudamalloc") {
      CHECK(rows == 3 * 8);  // every allocation and free is a cudaMalloc or cudaFree
      CHECK(pass_end_rows == 3);
    } else {
      CHECK(rows > 0);
      CHECK(o.calls_by_pass[1] == 0);  // warm: nothing logged after the first pass
    }
  }
  std::remove(path.c_str());
  call_log unwritable;
  std::string error;
  CHECK_FALSE(unwritable.open("no-such-directory/log.csv", error));
  CHECK(error.find("cannot write call log no-such-directory/log.csv") == 0);
}
