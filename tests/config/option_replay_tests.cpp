// Replay corpus for the FRAGLESS_CONF parser: the checked-in corpus files plus a
// deterministic stream of random and mutated strings. Under the sanitizer build this is
// what catches out-of-bounds reads; here it also checks the parser's contract on every
// input (no exception, result equal to a re-parse of its own to_conf_string).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "fragless/options.hpp"

namespace {

void check_contract(std::string_view input) {
  std::size_t warnings = 0;
  const fragless::options parsed = fragless::parse_options(input, [&](std::string_view message) {
    ++warnings;
    // Warnings are single printable lines.
    for (char c : message) REQUIRE((static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7f));
  });
  std::size_t reparse_warnings = 0;
  const fragless::options again =
      fragless::parse_options(fragless::to_conf_string(parsed), [&](std::string_view) { ++reparse_warnings; });
  REQUIRE(reparse_warnings == 0);
  REQUIRE(again == parsed);
  (void)warnings;
}

}  // namespace

TEST_CASE("corpus files") {
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(FRAGLESS_CONF_CORPUS_DIR)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream content;
    content << in.rdbuf();
    INFO(entry.path().string());
    check_contract(content.str());
    ++files;
  }
  CHECK(files >= 5);
}

TEST_CASE("random and mutated strings") {
  std::mt19937_64 random(12345);
  const std::string alphabet = "abcdefghijklmnopqrstuvwxyz_:,. 0123456789KMGTiBb-+eE\t\xff";
  std::vector<std::string> seeds;
  for (const fragless::option_info& row : fragless::option_table())
    seeds.push_back(std::string(row.key) + ":" + std::string(row.default_text));
  for (int round = 0; round < 20000; ++round) {
    std::string input;
    if (round % 2 == 0) {
      const std::size_t length = random() % 64;
      for (std::size_t i = 0; i < length; ++i) input += alphabet[random() % alphabet.size()];
    } else {
      input = seeds[random() % seeds.size()] + "," + seeds[random() % seeds.size()];
      const std::size_t edits = 1 + random() % 4;
      for (std::size_t e = 0; e < edits && !input.empty(); ++e) {
        const std::size_t at = random() % input.size();
        switch (random() % 3) {
          case 0: input[at] = alphabet[random() % alphabet.size()]; break;
          case 1: input.erase(at, 1); break;
          default: input.insert(at, 1, alphabet[random() % alphabet.size()]); break;
        }
      }
    }
    INFO(input);
    check_contract(input);
  }
}
