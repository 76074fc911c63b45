// Tests of the generated corpus, the idealized packer and the cost table: generator
// determinism (same seed, same bytes), validity and the peak cap of every family, the
// log-uniform draw, exact packer figures on hand traces, and the cost-table parser on good,
// bad and randomly corrupted input (warnings, never a throw, never a function left unpriced).
#include <catch2/catch.hpp>

#include "cost/cost_table.hpp"

#include <algorithm>
#include "replay/ideal.hpp"
#include "replay/ideal_packer.hpp"
#include "traces/text_trace.hpp"
#include "workloads/corpus.hpp"
#include "workloads/tensor_timeline.hpp"

#include <random>

using namespace fragless::bench;
using fragless::traces::read_text_trace;
using fragless::traces::trace;

TEST_CASE("every corpus family is deterministic, valid, multi-step and within the peak cap", "[bench][corpus]") {
  for (const std::string& family : corpus_families()) {
    for (std::uint64_t seed : {1u, 2u, 77u}) {
      INFO(family << " seed " << seed);
      const trace a = generate_corpus_workload(family, seed);
      const trace b = generate_corpus_workload(family, seed);
      REQUIRE(fragless::traces::write_text_trace(a) == fragless::traces::write_text_trace(b));
      REQUIRE_NOTHROW(fragless::traces::validate_trace(a));
      CHECK(a.name == corpus_source(family, seed));
      CHECK(a.events.size() > 20);
      CHECK(a.events.size() < 40000);  // small per-seed traces: the corpus must stay fast
      CHECK(compute_ideal(a).peak_live_bytes <= corpus_peak_cap_bytes);
      // Read back through the text format: the same trace.
      const trace back = read_text_trace(fragless::traces::write_text_trace(a), "back");
      CHECK(back.events.size() == a.events.size());
    }
    CHECK(fragless::traces::write_text_trace(generate_corpus_workload(family, 1)) !=
          fragless::traces::write_text_trace(generate_corpus_workload(family, 2)));
  }
  CHECK(generate_corpus_source("corpus:moe-routing:5").name == "corpus:moe-routing:5");
  CHECK_THROWS_AS(generate_corpus_workload("no-such-family", 1), std::invalid_argument);
  CHECK_THROWS_AS(generate_corpus_source("corpus:moe-routing:x"), std::invalid_argument);
}

TEST_CASE("corpus sizes span a wide range across seeds", "[bench][corpus]") {
  std::uint64_t smallest = UINT64_MAX, largest = 0;
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    for (const std::string& family : corpus_families()) {
      for (const auto& e : generate_corpus_workload(family, seed).events) {
        smallest = std::min(smallest, e.size_bytes);
        largest = std::max(largest, e.size_bytes);
      }
    }
  }
  CHECK(smallest <= 4096);
  CHECK(largest >= (std::uint64_t{1} << 30));
}

TEST_CASE("log_uniform stays in range and is spread over the exponents", "[bench][corpus]") {
  workload_random random(42);
  int low_half = 0;
  for (int i = 0; i < 4000; ++i) {
    const std::uint64_t v = random.log_uniform(512, std::uint64_t{4} << 30);
    REQUIRE(v >= 512);
    REQUIRE(v <= (std::uint64_t{4} << 30));
    if (v < (std::uint64_t{1} << 21)) ++low_half;  // 2 MiB: about the middle exponent of 2^9..2^32
  }
  CHECK(low_half > 1500);
  CHECK(low_half < 2500);
  CHECK(random.log_uniform(7, 7) == 7);
}

TEST_CASE("the idealized packer reuses freed space best-fit and counts page maps", "[bench][corpus]") {
  const std::uint64_t mib = 1 << 20;
  // Two 1 MiB blocks share page 0; a 3 MiB block goes above them (pages 0..2).
  trace t = read_text_trace("fragless-trace 1\n"
                            "a 0 1048576 0\n"
                            "a 1 1048576 0\n"
                            "a 2 3145728 0\n"
                            "f 0\n"
                            "a 3 1048576 0\n"  // best fit: the freed 1 MiB hole at 0
                            "f 1\nf 2\nf 3\n",
                            "hand");
  const packer_summary p = run_ideal_packer(t);
  CHECK(p.peak_mapped_bytes == 6 * mib);  // [0,5) MiB touched: pages 0, 1, 2
  CHECK(p.page_maps == 3);
  CHECK(p.page_unmaps == 3);
  CHECK(p.address_span_bytes == 5 * mib);
  // It never beats the live bytes.
  for (const std::string& family : corpus_families()) {
    const trace g = generate_corpus_workload(family, 5);
    CHECK(run_ideal_packer(g).peak_mapped_bytes + 2 * mib >= compute_ideal(g).ideal_bytes);
  }
}

TEST_CASE("cost table: the default parses, prices interpolate, and estimates add up", "[bench][cost]") {
  const cost_table& table = default_cost_table();
  for (std::size_t f = 0; f < costed_function_count; ++f) {
    INFO(costed_functions()[f]);
    CHECK(!table.points[f].empty());
  }
  std::vector<std::string> warnings;
  const cost_table t = parse_cost_table("fragless-costs 1\ndevice test\ncuMemMap 1000 10\ncuMemMap 3000 30\n", "t", warnings);
  CHECK(t.device == "test");
  CHECK(t.price_ns(4, 2000) == Approx(20));  // cuMemMap is index 4
  CHECK(t.price_ns(4, 10) == Approx(10));    // below the first point: the first price
  CHECK(t.price_ns(4, 5000) == Approx(50));  // above: the last slope
  // Functions the file does not price keep the default table's points (one warning each).
  CHECK(warnings.size() == costed_function_count - 1);
  CHECK(t.points[0].size() == table.points[0].size());

  pass_activity pass;
  pass.host_ns = 1000;
  pass.calls[4] = 2;  // two maps, nothing obtained: priced at 2 MiB each
  CHECK(estimated_allocator_ns(pass, t) == Approx(1000 + 2 * t.price_ns(4, 2 << 20)));

  // Note [Cost model]: the stream-ordering calls have one price each, whatever a pass
  // obtained; a table without them keeps the default's.
  const cost_table events = parse_cost_table(
      "fragless-costs 1\ncudaEventRecord 1 300\ncudaStreamWaitEvent 1 200\ncudaEventQuery 1 100\n", "e", warnings);
  const auto index_of = [](const char* name) {
    const auto& names = costed_functions();
    return static_cast<std::size_t>(std::find_if(names.begin(), names.end(),
                                                 [&](const char* f) { return std::string(f) == name; }) -
                                    names.begin());
  };
  const std::size_t record = index_of("cudaEventRecord"), wait = index_of("cudaStreamWaitEvent"),
                    query = index_of("cudaEventQuery");
  REQUIRE(query < costed_function_count);
  pass_activity ordered;
  ordered.host_ns = 500;
  ordered.obtained_bytes = 1 << 30;
  ordered.calls[record] = 3;
  ordered.calls[wait] = 5;
  ordered.calls[query] = 7;
  CHECK(estimated_allocator_ns(ordered, events) == Approx(500 + 3 * 300 + 5 * 200 + 7 * 100));
  for (std::size_t f : {record, wait, query}) CHECK(!table.points[f].empty());
}

TEST_CASE("cost table: bad files warn with file and line and keep the defaults", "[bench][cost]") {
  struct bad_case {
    const char* text;
    const char* warning;
  };
  const bad_case cases[] = {
      {"", "empty cost table"},
      {"hello\n", "not a cost table"},
      {"fragless-costs 1\ncuMemFoo 10 10\n", "t:2: unknown function 'cuMemFoo'"},
      {"fragless-costs 1\ncuMemMap ten 10\n", "t:2: needs 'FUNCTION BYTES NANOSECONDS'"},
      {"fragless-costs 1\ncuMemMap 0 10\n", "t:2: needs"},
      {"fragless-costs 1\ncuMemMap 10 -5\n", "t:2: needs"},
      {"fragless-costs 1\ncuMemMap 10 5 extra\n", "t:2: trailing text"},
      {"fragless-costs 1\ncuMemMap 10 5\ncuMemMap 10 6\n", "t:3: a second price"},
  };
  for (const bad_case& c : cases) {
    INFO(c.text);
    std::vector<std::string> warnings;
    cost_table t;
    REQUIRE_NOTHROW(t = parse_cost_table(c.text, "t", warnings));
    REQUIRE(!warnings.empty());
    bool found = false;
    for (const std::string& w : warnings) found = found || w.find(c.warning) != std::string::npos;
    CHECK(found);
    for (std::size_t f = 0; f < costed_function_count; ++f) CHECK(!t.points[f].empty());
  }
  std::vector<std::string> warnings;
  const cost_table missing = load_cost_table("/nonexistent/costs.txt", warnings);
  CHECK(warnings.size() == 1);
  CHECK(!missing.points[0].empty());
}

TEST_CASE("cost table parser fuzz: corrupted tables never throw and leave every function priced", "[bench][cost]") {
  const std::string base = format_cost_table(default_cost_table(), "fuzz base");
  std::mt19937_64 random(2024);
  const char alphabet[] = "0123456789 \n#-xcuMemMapfragless-costs1\t\r";
  for (int round = 0; round < 3000; ++round) {
    std::string text = base;
    const int edits = 1 + static_cast<int>(random() % 8);
    for (int e = 0; e < edits && !text.empty(); ++e) {
      const std::size_t at = random() % text.size();
      switch (random() % 3) {
        case 0: text[at] = alphabet[random() % (sizeof alphabet - 1)]; break;
        case 1: text.erase(at, 1 + random() % 20); break;
        default: text.insert(at, 1, alphabet[random() % (sizeof alphabet - 1)]); break;
      }
    }
    std::vector<std::string> warnings;
    cost_table t;
    REQUIRE_NOTHROW(t = parse_cost_table(text, "fuzz", warnings));
    for (std::size_t f = 0; f < costed_function_count; ++f) {
      REQUIRE(!t.points[f].empty());
      REQUIRE(t.price_ns(f, 1 << 21) >= 0);
    }
  }
}
