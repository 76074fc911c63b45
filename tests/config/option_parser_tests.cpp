// FRAGLESS_CONF parser: accepted values land in the struct, every bad input warns once
// naming the key and keeps the previous value, nothing throws.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>
#include <vector>

#include "fragless/options.hpp"

using fragless::options;

namespace {

struct parse_outcome {
  options values;
  std::vector<std::string> warnings;
};

parse_outcome parse(std::string_view conf) {
  parse_outcome outcome;
  outcome.values =
      fragless::parse_options(conf, [&](std::string_view message) { outcome.warnings.emplace_back(message); });
  return outcome;
}

}  // namespace

TEST_CASE("empty and whitespace-only configurations give the defaults without warnings") {
  for (const char* conf : {"", " ", ",", " , ,, ", "\t"}) {
    const parse_outcome outcome = parse(conf);
    CHECK(outcome.values == options{});
    CHECK(outcome.warnings.empty());
  }
}

TEST_CASE("sizes with units are parsed into bytes") {
  struct row {
    const char* conf;
    std::uint64_t expected;
  };
  const row rows[] = {
      {"max_cached_bytes:4GiB", 4ull << 30},
      {"max_cached_bytes:4294967296", 4ull << 30},
      {"max_cached_bytes: 4 gib ", 4ull << 30},
      {"max_cached_bytes:1.5GiB", 3ull << 29},
      {"max_cached_bytes:3MB", 3000000},
      {"max_cached_bytes:2048KiB", 2ull << 20},
      {"max_cached_bytes:1TiB", 1ull << 40},
      {"max_cached_bytes:unlimited", fragless::unlimited_bytes},
      {"max_cached_bytes:18446744073709551615", 18446744073709551615ull},
  };
  for (const row& r : rows) {
    INFO(r.conf);
    const parse_outcome outcome = parse(r.conf);
    CHECK(outcome.warnings.empty());
    CHECK(outcome.values.max_cached_bytes == r.expected);
  }
}

TEST_CASE("bad sizes warn once, name the key and the range, and keep the default") {
  const char* bad[] = {
      "max_cached_bytes:-1",   "max_cached_bytes:abc",      "max_cached_bytes:",
      "max_cached_bytes:1XB",  "max_cached_bytes:18446744073709551616", "max_cached_bytes:20000000TiB",
      "max_cached_bytes:1.GiB", "max_cached_bytes:.5GiB",   "max_cached_bytes:1KiB",  // below the 2MiB minimum
      "small_max_bytes:unlimited",  // not allowed for this key
  };
  for (const char* conf : bad) {
    INFO(conf);
    const parse_outcome outcome = parse(conf);
    REQUIRE(outcome.warnings.size() == 1);
    const std::string key = std::string(conf).substr(0, std::string(conf).find(':'));
    CHECK(outcome.warnings[0].find(key) != std::string::npos);
    CHECK(outcome.warnings[0].find("accepted:") != std::string::npos);
    CHECK(outcome.values == options{});
  }
}

TEST_CASE("booleans accept exactly True/False/true/false/1/0") {
  CHECK_FALSE(parse("publish_stats:False").values.publish_stats);
  CHECK_FALSE(parse("publish_stats:false").values.publish_stats);
  CHECK_FALSE(parse("publish_stats:0").values.publish_stats);
  CHECK(parse("background_compaction:True").values.background_compaction);
  CHECK(parse("background_compaction:true").values.background_compaction);
  CHECK(parse("background_compaction:1").values.background_compaction);
  for (const char* conf : {"publish_stats:yes", "publish_stats:FALSE ", "publish_stats:2", "publish_stats:"}) {
    INFO(conf);
    const parse_outcome outcome = parse(conf);
    CHECK(outcome.warnings.size() == 1);  // "FALSE": only the listed spellings are accepted
    CHECK(outcome.values.publish_stats == true);
  }
}

TEST_CASE("fractions must lie strictly between 0 and 1, or be 0") {
  CHECK(parse("garbage_collection_threshold:0.8").values.garbage_collection_threshold == Approx(0.8));
  CHECK(parse("garbage_collection_threshold:0").values.garbage_collection_threshold == 0.0);
  for (const char* conf : {"garbage_collection_threshold:1", "garbage_collection_threshold:1.5",
                           "garbage_collection_threshold:-0.2", "garbage_collection_threshold:nan",
                           "garbage_collection_threshold:inf", "garbage_collection_threshold:0x0.8",
                           "garbage_collection_threshold:half"}) {
    INFO(conf);
    const parse_outcome outcome = parse(conf);
    CHECK(outcome.warnings.size() == 1);
    CHECK(outcome.values.garbage_collection_threshold == 0.0);
  }
}

TEST_CASE("backend takes auto, vmm or cudaMalloc") {
  CHECK(parse("backend:vmm").values.backend == fragless::backend_kind::vmm);
  CHECK(parse("backend:cudaMalloc").values.backend == fragless::backend_kind::cuda_malloc);
  CHECK(parse("backend:auto").values.backend == fragless::backend_kind::automatic);
  const parse_outcome outcome = parse("backend:native");
  REQUIRE(outcome.warnings.size() == 1);
  CHECK(outcome.warnings[0].find("auto, vmm, cudaMalloc") != std::string::npos);
  CHECK(outcome.values.backend == fragless::backend_kind::automatic);
}

TEST_CASE("unknown keys and entries without a colon warn and change nothing") {
  parse_outcome outcome = parse("no_such_key:1,publish_stats:False");
  REQUIRE(outcome.warnings.size() == 1);
  CHECK(outcome.warnings[0].find("no_such_key") != std::string::npos);
  CHECK(outcome.warnings[0].find("known keys: backend release_threshold_bytes") != std::string::npos);
  CHECK_FALSE(outcome.values.publish_stats);

  outcome = parse("publish_stats");
  REQUIRE(outcome.warnings.size() == 1);
  CHECK(outcome.values == options{});
}

TEST_CASE("a repeated key warns and the last value wins") {
  const parse_outcome outcome = parse("max_split_bytes:64MiB, max_split_bytes:128MiB");
  REQUIRE(outcome.warnings.size() == 1);
  CHECK(outcome.warnings[0].find("max_split_bytes") != std::string::npos);
  CHECK(outcome.values.max_split_bytes == 128ull << 20);
}

TEST_CASE("several keys with spaces around them") {
  const parse_outcome outcome =
      parse("  backend : vmm ,small_max_bytes:512KiB,  publish_stats :False, compact_threshold_bytes:1GiB ");
  CHECK(outcome.warnings.empty());
  CHECK(outcome.values.backend == fragless::backend_kind::vmm);
  CHECK(outcome.values.small_max_bytes == 512ull << 10);
  CHECK_FALSE(outcome.values.publish_stats);
  CHECK(outcome.values.compact_threshold_bytes == 1ull << 30);
}

TEST_CASE("a bad value keeps the base value given, not only the default") {
  options base{};
  base.small_max_bytes = 256 * 1024;
  std::vector<std::string> warnings;
  const options parsed = fragless::parse_options(
      "small_max_bytes:huge", [&](std::string_view m) { warnings.emplace_back(m); }, base);
  CHECK(parsed.small_max_bytes == 256 * 1024);
  CHECK(warnings.size() == 1);
}

TEST_CASE("to_conf_string round-trips through the parser") {
  options values{};
  values.backend = fragless::backend_kind::cuda_malloc;
  values.max_cached_bytes = 3ull << 30;
  values.small_max_bytes = 1536 * 1024;
  values.garbage_collection_threshold = 0.625;
  values.publish_stats = false;
  values.dedicated_mapping_threshold_bytes = fragless::unlimited_bytes;
  const parse_outcome outcome = parse(fragless::to_conf_string(values));
  CHECK(outcome.warnings.empty());
  CHECK(outcome.values == values);
}

TEST_CASE("a throwing warning callback does not escape the parser") {
  const options parsed =
      fragless::parse_options("bogus:1,publish_stats:False", [](std::string_view) { throw 42; });
  CHECK_FALSE(parsed.publish_stats);
}

TEST_CASE("options_from_environment reads FRAGLESS_CONF") {
  ::setenv("FRAGLESS_CONF", "max_split_bytes:40MiB", 1);
  CHECK(fragless::options_from_environment([](std::string_view) {}).max_split_bytes == 40ull << 20);
  ::unsetenv("FRAGLESS_CONF");
  CHECK(fragless::options_from_environment([](std::string_view) {}) == options{});
}

namespace {

// stderr of `f`, through a temporary file (the default warning path writes there).
template <typename F>
std::string captured_stderr(F&& f) {
  std::fflush(stderr);
  char path[] = "/tmp/fragless-conf-stderr-XXXXXX";
  const int file = ::mkstemp(path);
  const int saved = ::dup(STDERR_FILENO);
  ::dup2(file, STDERR_FILENO);
  f();
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  std::string text;
  char buffer[4096];
  ::lseek(file, 0, SEEK_SET);
  for (ssize_t n; (n = ::read(file, buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<std::size_t>(n));
  ::close(file);
  ::unlink(path);
  return text;
}

std::string many_unknown_keys(const std::string& prefix, int count) {
  std::string conf;
  for (int i = 0; i < count; ++i) conf += prefix + std::to_string(i) + ":1,";
  return conf;
}

}  // namespace

// Note [Bounded warnings]
TEST_CASE("400 unknown keys: the key list once, a few lines on stderr, none at FRAGLESS_LOG_LEVEL=off") {
  const parse_outcome outcome = parse(many_unknown_keys("bogus_key_a", 400));
  REQUIRE(outcome.warnings.size() == 400);  // a callback still hears every problem
  CHECK(outcome.warnings[0].find("known keys: backend") != std::string::npos);
  for (std::size_t i = 1; i < outcome.warnings.size(); ++i) CHECK(outcome.warnings[i].size() < 160);

  ::unsetenv("FRAGLESS_LOG_LEVEL");
  const std::string printed = captured_stderr([] { fragless::parse_options(many_unknown_keys("bogus_key_b", 400)); });
  const auto lines = std::count(printed.begin(), printed.end(), '\n');
  CHECK(lines <= 10);
  CHECK(printed.size() < 4000);
  CHECK(printed.find("more FRAGLESS_CONF problems not shown") != std::string::npos);

  for (const char* level : {"off", "error"}) {
    ::setenv("FRAGLESS_LOG_LEVEL", level, 1);
    const std::string silent = captured_stderr([&] {
      fragless::parse_options(many_unknown_keys(std::string("bogus_key_c_") + level, 400));
    });
    CHECK(silent.empty());
  }
  ::unsetenv("FRAGLESS_LOG_LEVEL");
}
