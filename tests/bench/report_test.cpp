// Tests of the outputs: the JSON/CSV schema comes from the one field list, missing values
// are null/empty, summary rows are geometric means over ok rows, the plot is well-formed
// with one panel per trace, and files are written whole.
#include <catch2/catch.hpp>

#include "report/corpus_report.hpp"
#include "report/outputs.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

using namespace fragless::bench;

namespace {
result_row row(const std::string& trace, const std::string& allocator, double ratio, double ns) {
  result_row r;
  r.trace = trace;
  r.allocator = allocator;
  r.ideal_bytes = 2097152;
  r.peak_reserved_bytes = ratio * 2097152;
  r.ratio_to_ideal = ratio;
  r.host_ns_per_op = ns;
  r.timeline = {{0, 100, 2097152}, {5, 2000000, static_cast<std::uint64_t>(ratio * 2097152)}};
  return r;
}
}  // namespace

TEST_CASE("JSON rows carry every field of the field list, null when missing", "[bench][report]") {
  result_row r = row("t \"quoted\"", "cudamalloc", 1.5, 250);
  r.notes = "line\nbreak";
  const std::string json = format_json({r});
  for (const row_field& f : row_fields()) CHECK(json.find(std::string("\"") + f.name + "\": ") != std::string::npos);
  for (const char* required : {"trace", "allocator", "peak_reserved_bytes", "ideal_bytes", "ratio_to_ideal",
                               "host_ns_per_op", "device_calls", "syncs", "status"}) {
    CHECK(json.find(std::string("\"") + required + "\"") != std::string::npos);
  }
  CHECK(json.find("\"peak_reserved_bytes\": 3145728") != std::string::npos);
  CHECK(json.find("\"device_calls\": null") != std::string::npos);
  CHECK(json.find("t \\\"quoted\\\"") != std::string::npos);
  CHECK(json.find("line\\nbreak") != std::string::npos);
  CHECK(json.front() == '[');
}

TEST_CASE("CSV header is the field list; text with commas is quoted", "[bench][report]") {
  result_row r = row("a,b", "pytorch", 1.25, 10);
  const std::string csv = format_csv({r});
  std::string header = csv.substr(0, csv.find('\n'));
  std::string expected;
  for (const row_field& f : row_fields()) expected += (expected.empty() ? "" : ",") + std::string(f.name);
  CHECK(header == expected);
  CHECK(csv.find("\"a,b\",pytorch,2621440,2097152,1.25,") != std::string::npos);
}

TEST_CASE("summary rows: geometric means over ok rows only", "[bench][report]") {
  std::vector<result_row> rows = {row("t1", "x", 1.0, 100), row("t2", "x", 4.0, 400), row("t3", "x", 9.0, 9)};
  rows[2].status = "failed: crashed";
  const auto with_summary = with_summary_rows(rows);
  REQUIRE(with_summary.size() == 4);
  const result_row& summary = with_summary.back();
  CHECK(summary.trace == "geomean (2 common traces)");
  CHECK(summary.ratio_to_ideal.value() == Approx(2.0));
  CHECK(summary.host_ns_per_op.value() == Approx(200.0));
  CHECK(summary.status == "summary (1 rows not ok)");
  const std::string table = format_table(with_summary);
  CHECK(table.find("geomean (2 common traces)") != std::string::npos);
  CHECK(table.find("failed: crashed") != std::string::npos);
  CHECK(table.find("8.00 MiB") != std::string::npos);  // t2: 4 x 2 MiB
}

TEST_CASE("SVG plot: one titled panel per trace, a legend entry per allocator", "[bench][report]") {
  const std::string svg = format_svg_plot({row("first", "a", 1.0, 1), row("first", "b", 2.0, 1), row("second", "a", 1.5, 1)},
                                          "title <here>");
  CHECK(svg.rfind("<svg ", 0) == 0);
  CHECK(svg.find("</svg>") != std::string::npos);
  CHECK(svg.find("title &lt;here&gt;") != std::string::npos);
  CHECK(svg.find(">first</text>") != std::string::npos);
  CHECK(svg.find(">second</text>") != std::string::npos);
  CHECK(svg.find(">a reserved</text>") != std::string::npos);
  CHECK(svg.find(">b reserved</text>") != std::string::npos);
  CHECK(svg.find(">GiB</text>") != std::string::npos);
  std::size_t polylines = 0;
  for (std::size_t at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1)) ++polylines;
  CHECK(polylines == 3 + 2);  // three reserved lines, one live line per panel
}

TEST_CASE("summary rows compare allocators over the same traces", "[bench][report]") {
  std::vector<result_row> rows = {row("t1", "a", 1.0, 10), row("t1", "b", 2.0, 10),  // common
                                  row("t2", "a", 3.0, 10), row("t2", "b", 5.0, 10),  // b failed here
                                  row("t1", "never", 1.0, 1), row("t1", "pytorch-recorded", 1.5, 1)};
  rows[3].status = "oom";
  rows[4].status = "not built";  // an allocator with no ok row does not shrink the common set
  const auto out = with_summary_rows(rows);
  const auto summary_of = [&](const std::string& allocator) {
    for (const result_row& r : out) {
      if (r.allocator == allocator && r.trace.rfind("geomean", 0) == 0) return r;
    }
    FAIL("no summary for " << allocator);
    return result_row{};
  };
  CHECK(summary_of("a").ratio_to_ideal.value() == Approx(1.0));  // t2 excluded: b was not ok there
  CHECK(summary_of("a").trace == "geomean (1 common traces)");
  CHECK(summary_of("b").ratio_to_ideal.value() == Approx(2.0));
  CHECK(summary_of("pytorch-recorded").ratio_to_ideal.value() == Approx(1.5));
  CHECK(summary_of("never").status == "no ok rows");
}

TEST_CASE("files are written whole, and a failed write leaves nothing", "[bench][report]") {
  const std::string path = "report_test_output.txt";
  write_file_atomically(path, "hello\n");
  std::ifstream in(path);
  std::stringstream contents;
  contents << in.rdbuf();
  CHECK(contents.str() == "hello\n");
  std::remove(path.c_str());
  CHECK_THROWS_AS(write_file_atomically("no/such/dir/out.txt", "x"), std::runtime_error);
}

TEST_CASE("corpus report: seeds by the repetition after which their device calls stopped", "[bench][report]") {
  // Note [Steady state]: a seed counts in the column of its last calling repetition when its
  // last repetition made no call, else as still calling; a seed with no call at all counts
  // as stopping after the first.
  auto seed = [](const char* family, int number, const char* allocator, double last_calling, double steady) {
    corpus_row r{family, row(std::string("corpus:") + family + ":" + std::to_string(number), allocator, 1.0, 100)};
    r.row.last_calling_pass = last_calling;
    r.row.steady_calls = steady;
    return r;
  };
  const std::vector<corpus_row> rows = {
      seed("a", 1, "fragless", 3, 0), seed("a", 2, "fragless", 5, 12), seed("a", 3, "fragless", 0, 0),
      seed("a", 1, "pytorch", 1, 0),  seed("a", 2, "pytorch", 1, 0),   seed("a", 3, "pytorch", 1, 0),
      seed("b", 1, "fragless", 2, 0), seed("b", 1, "pytorch", 2, 0),   seed("b", 1, "fragless[x]", 5, 3)};
  const std::string markdown = format_corpus_markdown(rows, {"a", "b"}, "fragless-bench corpus");
  INFO(markdown);
  CHECK(markdown.find("| family | peer | after pass 1 | after pass 2 | after pass 3 | still calling |") != std::string::npos);
  CHECK(markdown.find("| a | fragless | 1 | 0 | 1 | 1 |") != std::string::npos);
  CHECK(markdown.find("| a | pytorch | 3 | 0 | 0 | 0 |") != std::string::npos);
  CHECK(markdown.find("| b | fragless | 0 | 1 | 0 | 0 |\n| b | fragless[x] | 0 | 0 | 0 | 1 |\n| b | pytorch |") !=
        std::string::npos);
  CHECK(markdown.find("| all | fragless | 1 | 1 | 1 | 1 |") != std::string::npos);
  const std::string json = format_corpus_json(rows, {"a", "b"}, "fragless-bench corpus");
  CHECK(json.find("\"settled_after_pass\": {\"1\": 1, \"3\": 1}") != std::string::npos);
}

TEST_CASE("corpus report: host time of each repetition, and the per-pass fields round-trip", "[bench][report]") {
  // Note [Steady state]: the per-family table gives each repetition's geometric mean over
  // the seeds, from the rows' host_ns_by_pass, beside the median the first table gives.
  auto seed = [](int number, const char* allocator, const std::vector<double>& ns_by_pass) {
    corpus_row r{"a", row("corpus:a:" + std::to_string(number), allocator, 1.0, 100)};
    r.row.host_ns_by_pass = pass_list(ns_by_pass, 1);
    return r;
  };
  const std::vector<corpus_row> rows = {seed(1, "fragless", {400, 100, 900}), seed(2, "fragless", {100, 400, 100}),
                                        seed(1, "pytorch", {300, 200, 200}), seed(2, "pytorch", {300, 200})};
  const std::string markdown = format_corpus_markdown(rows, {"a"}, "fragless-bench corpus");
  INFO(markdown);
  CHECK(markdown.find("| family | peer | pass 1 | pass 2 | pass 3 |") != std::string::npos);
  CHECK(markdown.find("| a | fragless | 200 | 200 | 300 |") != std::string::npos);
  // A seed with fewer repetitions counts only in those it has.
  CHECK(markdown.find("| a | pytorch | 300 | 200 | 200 |") != std::string::npos);
  const std::string json = format_corpus_json(rows, {"a"}, "fragless-bench corpus");
  CHECK(json.find("\"host_ns_per_op_by_pass_geomean\": [200.000000, 200.000000, 300.000000]") != std::string::npos);
  CHECK(pass_list({4840, 272, 3598, 0}, 0) == "4840 272 3598 0");
  CHECK(parse_pass_list("250.5 3 x 7") == std::vector<double>{250.5, 3});
  CHECK(parse_pass_list("").empty());
  // One repetition: no table.
  const std::vector<corpus_row> single = {seed(1, "fragless", {400})};
  CHECK(format_corpus_markdown(single, {"a"}, "c").find("by repetition") == std::string::npos);
}

TEST_CASE("corpus report: what a shorter run would have reported, from the first repetitions", "[bench][report]") {
  // Note [Steady state]: a run of k repetitions counts the k-th as its steady pass and the
  // median of the k as its host time; the report reads both from a longer run's rows.
  auto seed = [](int number, const char* allocator, const std::vector<double>& calls, const std::vector<double>& ns) {
    corpus_row r{"a", row("corpus:a:" + std::to_string(number), allocator, 1.0, 100)};
    r.row.calls_by_pass = pass_list(calls, 0);
    r.row.host_ns_by_pass = pass_list(ns, 1);
    return r;
  };
  const std::vector<corpus_row> rows = {
      seed(1, "fragless", {9, 4, 2, 0}, {400, 300, 100, 100}), seed(1, "pytorch", {3, 0, 0, 0}, {200, 100, 100, 100}),
      seed(2, "fragless", {9, 0, 5, 0}, {400, 100, 200, 100}), seed(2, "pytorch", {3, 1, 0, 0}, {200, 100, 100, 100})};
  const std::string markdown = format_corpus_markdown(rows, {"a"}, "fragless-bench corpus");
  INFO(markdown);
  CHECK(markdown.find("| family | peer | calls in pass 2 | host / PyTorch, 2 passes | calls in pass 3 | host / PyTorch, 3 "
                      "passes |") != std::string::npos);
  // Pass 2: only seed 1's PyTorch makes no call there, and fragless calls (1 of 1); medians of
  // two: 350/150 and 250/150, geometric mean sqrt(7/3 x 5/3) = 1.97. Pass 3: both compared,
  // both call (2 of 2); medians of three: 300/100 and 200/100, sqrt(6) = 2.45.
  CHECK(markdown.find("| a | fragless | 1 of 1 | 1.97 | 2 of 2 | 2.45 |") != std::string::npos);
  const std::string json = format_corpus_json(rows, {"a"}, "fragless-bench corpus");
  CHECK(json.find("{\"repetitions\": 3, \"calling_where_pytorch_zero\": 2, \"pytorch_zero\": 2") != std::string::npos);
}

TEST_CASE("corpus report: the longest single call over the seeds, median, 90th percentile and worst", "[bench][report]") {
  // Note [Host work]: a seed's longest call is a stall its host ns/op hides; the table gives
  // its median over the seeds, the nearest-rank 90th percentile and the worst, in us.
  auto seed = [](int number, const char* allocator, double longest_ns) {
    corpus_row r{"a", row("corpus:a:" + std::to_string(number), allocator, 1.0, 100)};
    r.row.longest_op_ns = longest_ns;
    return r;
  };
  std::vector<corpus_row> rows;
  for (int number = 1; number <= 10; ++number) {
    rows.push_back(seed(number, "fragless", 1000.0 * number));  // 1 .. 10 us
    rows.push_back(seed(number, "pytorch", 2000.0));
  }
  rows.push_back(seed(11, "fragless", 120000.0));  // one layout on the allocating thread: 120 us
  const std::string markdown = format_corpus_markdown(rows, {"a"}, "fragless-bench corpus");
  INFO(markdown);
  CHECK(markdown.find("| family | peer | median (us) | 90th percentile (us) | worst (us) |") != std::string::npos);
  // 11 fragless seeds: median the 6th (6 us), the 90th percentile the 10th (rank ceil(9.9)).
  CHECK(markdown.find("| a | fragless | 6 | 10 | 120 |") != std::string::npos);
  CHECK(markdown.find("| a | pytorch | 2 | 2 | 2 |") != std::string::npos);
  const std::string json = format_corpus_json(rows, {"a"}, "fragless-bench corpus");
  CHECK(json.find("\"longest_op_ns_median\": 6000.000000, \"longest_op_ns_p90\": 10000.000000, \"longest_op_ns_worst\": "
                  "120000.000000") != std::string::npos);
  // Rows without the figure: no table.
  const std::vector<corpus_row> none = {corpus_row{"a", row("corpus:a:1", "fragless", 1.0, 100)}};
  CHECK(format_corpus_markdown(none, {"a"}, "c").find("Longest single") == std::string::npos);
}

TEST_CASE("corpus report: the goals by program size, a seed's ideal in bands of factors of four", "[bench][report]") {
  // Note [Goals by program size]: a seed counts in the band of its ideal, whichever family
  // it comes from; bands without a seed are left out.
  auto seed = [](const char* family, int number, const char* allocator, double ideal_bytes, double ratio, double calls) {
    corpus_row r{family, row(std::string("corpus:") + family + ":" + std::to_string(number), allocator, ratio, 100)};
    r.row.ideal_bytes = ideal_bytes;
    r.row.peak_reserved_bytes = ratio * ideal_bytes;
    r.row.device_calls = calls;
    return r;
  };
  const double mib = 1024.0 * 1024.0;
  const std::vector<corpus_row> rows = {
      // 100 MiB: more calls than expandable segments, a peak below both peers.
      seed("a", 1, "fragless", 100 * mib, 1.01, 90), seed("a", 1, "pytorch", 100 * mib, 1.2, 5),
      seed("a", 1, "pytorch-expandable", 100 * mib, 1.1, 10),
      // 2 GiB, from another family: fewer calls, a peak above expandable segments'.
      seed("b", 1, "fragless", 2048 * mib, 1.02, 100), seed("b", 1, "pytorch", 2048 * mib, 1.3, 50),
      seed("b", 1, "pytorch-expandable", 2048 * mib, 1.01, 400),
      // Exactly 4 GiB opens the next band.
      seed("b", 2, "fragless", 4096 * mib, 1.0, 10), seed("b", 2, "pytorch-expandable", 4096 * mib, 1.0, 20)};
  const std::string markdown = format_corpus_markdown(rows, {"a", "b"}, "fragless-bench corpus");
  INFO(markdown);
  CHECK(markdown.find("| program size | peak > PyTorch | peak > expandable |") != std::string::npos);
  CHECK(markdown.find("| < 256 MiB | 0 of 1 | 0 of 1 | 0.918 | 0 of 0 | 1 of 1 | 9.00 |") != std::string::npos);
  CHECK(markdown.find("| 1 - 4 GiB | 0 of 1 | 1 of 1 | 1.010 | 0 of 0 | 0 of 1 | 0.25 |") != std::string::npos);
  CHECK(markdown.find("| 4 - 16 GiB | 0 of 0 | 0 of 1 |") != std::string::npos);
  CHECK(markdown.find("| 256 MiB - 1 GiB |") == std::string::npos);
  CHECK(markdown.find("| >= 16 GiB |") == std::string::npos);
  // The per-family table is unchanged by the bands: family b holds both of its seeds.
  CHECK(markdown.find("| b | 0 of 1 | 1 of 2 |") != std::string::npos);
  const std::string json = format_corpus_json(rows, {"a", "b"}, "fragless-bench corpus");
  CHECK(json.find("\"by_size\": [\n    {\"size\": \"< 256 MiB\", \"goals\": {\"above_pytorch\": 0, \"compared_pytorch\": 1, "
                  "\"above_expandable\": 0, \"compared_expandable\": 1") != std::string::npos);
  CHECK(json.find("{\"size\": \"4 - 16 GiB\", \"goals\": {\"above_pytorch\": 0, \"compared_pytorch\": 0, "
                  "\"above_expandable\": 0, \"compared_expandable\": 1") != std::string::npos);
}
