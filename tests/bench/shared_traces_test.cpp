// Tests over the shared reference traces: every pickle parses with the data-only reader,
// the seeding consistency check passes on every snapshot, and every CSV reads. The shared
// directory must exist (CI always has it): its absence is a failure, not a skip.
#include <catch2/catch.hpp>

#include "cli/trace_sources.hpp"
#include "traces/csv_readers.hpp"
#include "pickle_reader.hpp"
#include "traces/snapshot_reader.hpp"
#include "traces/text_trace.hpp"

#include <filesystem>

using namespace fragless::traces;

namespace {
std::vector<std::string> shared_files(const std::string& extension) {
  const std::string dir = FRAGLESS_SHARED_TRACES_DIR;
  INFO("shared traces directory " << dir);
  REQUIRE(std::filesystem::is_directory(dir));
  std::vector<std::string> files;
  for (const std::string& path : fragless::bench::list_trace_files(dir)) {
    if (std::filesystem::path(path).extension() == extension) files.push_back(path);
  }
  return files;
}
}  // namespace

TEST_CASE("every shared snapshot parses and passes the seeding consistency check", "[bench][shared]") {
  const auto files = shared_files(".pickle");
  REQUIRE(files.size() >= 20);
  std::size_t with_events = 0;
  for (const std::string& path : files) {
    INFO(path);
    const std::string bytes = read_file_bytes(path);
    REQUIRE_NOTHROW(read_pickle(bytes));
    snapshot_facts facts;
    const trace t = read_snapshot(bytes, path, &facts);
    CHECK(facts.seeding_consistent);
    CHECK(facts.replay_end_live_bytes == facts.dump_live_bytes);
    CHECK(facts.dump_reserved_bytes > 0);
    REQUIRE_FALSE(t.recorded_reserved.empty());
    // The native allocator never reserved less than the live bytes it held at the end.
    CHECK(facts.dump_reserved_bytes >= facts.dump_live_bytes);
    if (t.events.size() > t.seeded_block_count + 100) ++with_events;
  }
  CHECK(with_events >= 10);
}

TEST_CASE("every shared CSV reads as a lifetime trace and round-trips through the text format", "[bench][shared]") {
  const auto files = shared_files(".csv");
  REQUIRE(files.size() >= 10);
  for (const std::string& path : files) {
    INFO(path);
    const trace t = load_trace_file(path, path);
    CHECK(t.source_format == "lifetime-csv");
    CHECK_FALSE(t.events.empty());
    const trace back = read_text_trace(write_text_trace(t), path);
    CHECK(back.events.size() == t.events.size());
  }
}
