// The options table: one row per field, defaults parse back to the struct defaults,
// --help and the Markdown table list every key.
#include <catch2/catch.hpp>

#include <set>
#include <sstream>
#include <string>

#include "fragless/options.hpp"

TEST_CASE("every table row has a unique key, a description and an accepted range") {
  std::set<std::string_view> keys;
  const auto table = fragless::option_table();
  REQUIRE(table.size() >= 12);
  for (const fragless::option_info& row : table) {
    CHECK(keys.insert(row.key).second);
    CHECK_FALSE(row.description.empty());
    CHECK_FALSE(row.accepted.empty());
    CHECK(fragless::find_option(row.key) == &row);
  }
  CHECK(fragless::find_option("no_such_option") == nullptr);
}

TEST_CASE("each default text parses to the struct's default value") {
  for (const fragless::option_info& row : fragless::option_table()) {
    INFO(row.key);
    std::vector<std::string> warnings;
    const fragless::options changed{};
    const std::string conf = std::string(row.key) + ":" + std::string(row.default_text);
    const fragless::options parsed =
        fragless::parse_options(conf, [&](std::string_view m) { warnings.emplace_back(m); }, changed);
    CHECK(warnings.empty());
    CHECK(fragless::option_value_text(parsed, row.key) == row.default_text);
  }
}

TEST_CASE("--help text and the Markdown table list every option") {
  std::ostringstream help;
  fragless::print_options_help(help);
  const std::string markdown = fragless::options_markdown_table();
  CHECK(markdown.rfind("| Key | Type | Default | Accepted | Description |", 0) == 0);
  std::size_t rows = 0;
  for (char c : markdown) rows += c == '\n';
  CHECK(rows == fragless::option_table().size() + 2);
  for (const fragless::option_info& row : fragless::option_table()) {
    CHECK(help.str().find(std::string(row.key)) != std::string::npos);
    CHECK(markdown.find("`" + std::string(row.key) + "`") != std::string::npos);
  }
}

TEST_CASE("size formatting picks the largest exact binary unit") {
  CHECK(fragless::format_size_bytes(0) == "0B");
  CHECK(fragless::format_size_bytes(513) == "513B");
  CHECK(fragless::format_size_bytes(1536 * 1024) == "1536KiB");
  CHECK(fragless::format_size_bytes(4ull << 30) == "4GiB");
  CHECK(fragless::format_size_bytes(fragless::unlimited_bytes) == "unlimited");
  std::uint64_t bytes = 0;
  std::string error;
  for (std::uint64_t value : {0ull, 1ull, 513ull, 1536ull * 1024, 4ull << 30, 5ull << 40, 123456789ull}) {
    REQUIRE(fragless::parse_size_bytes(fragless::format_size_bytes(value), false, bytes, error));
    CHECK(bytes == value);
  }
}
