// memory_summary layout: title, OOM line, header, every row of torch's table in order,
// every line 77 characters wide with the column bars aligned, and numbers formatted with
// PyTorch's unit rules.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "fragless/stats.hpp"

using namespace fragless;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

device_stats sample_stats() {
  device_stats stats{};
  update(stats.allocated_bytes, pool_large, 3ll << 30);
  update(stats.allocated_bytes, pool_small, 5ll << 20);
  update(stats.allocated_bytes, pool_small, -(1ll << 20));
  update(stats.reserved_bytes, pool_large, 4ll << 30);
  update(stats.reserved_bytes, pool_small, 8ll << 20);
  update(stats.allocation, pool_small, 1234567);
  update(stats.allocation, pool_large, 42);
  stats.num_ooms = 2;
  stats.num_alloc_retries = 17;
  stats.largest_free_block_bytes = 512ll << 20;
  return stats;
}

}  // namespace

TEST_CASE("summary has torch's structure with the fragless title") {
  const std::vector<std::string> lines = lines_of(memory_summary(sample_stats(), 3));
  REQUIRE(lines.size() > 40);
  for (const std::string& line : lines) {
    INFO(line);
    CHECK(line.size() == 77);
    CHECK(line.front() == '|');
    CHECK(line.back() == '|');
  }
  CHECK(lines[0] == "|" + std::string(75, '=') + "|");
  CHECK(lines[1] == "|                  fragless CUDA memory summary, device ID 3                |");
  CHECK(lines[3] == "|            CUDA OOMs: 2            |        cudaMalloc retries: 17        |");
  CHECK(lines[5] == "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |");

  const char* rows[] = {"Allocated memory", "Active memory", "Requested memory", "GPU reserved memory",
                        "Non-releasable memory", "Allocations", "Active allocs", "GPU reserved segments",
                        "Non-releasable allocs"};
  std::size_t at = 6;
  for (const char* row : rows) {
    INFO(row);
    CHECK(lines[at] == "|" + std::string(75, '-') + "|");
    CHECK(lines[at + 1].substr(0, 2 + std::string(row).size()) == "| " + std::string(row));
    CHECK(lines[at + 2].rfind("|       from large pool", 0) == 0);
    CHECK(lines[at + 3].rfind("|       from small pool", 0) == 0);
    for (std::size_t k = 1; k <= 3; ++k)
      for (std::size_t bar : {24u, 37u, 50u, 63u}) CHECK(lines[at + k][bar] == '|');
    at += 4;
  }
  CHECK(lines[at + 1].rfind("| Oversize allocations ", 0) == 0);
  CHECK(lines[at + 3].rfind("| Oversize GPU segments ", 0) == 0);
  CHECK(lines[at + 4] == "|" + std::string(75, '=') + "|");
}

TEST_CASE("numbers use the all-pools row to pick a unit, as torch does") {
  const std::vector<std::string> lines = lines_of(memory_summary(sample_stats(), 0));
  // Allocated memory: all = 3076 MiB, under 768 Ki MiB -> MiB for all three rows.
  CHECK(lines[7].substr(24, 14) == "|   3076 MiB |");
  CHECK(lines[8].substr(24, 14) == "|   3072 MiB |");
  CHECK(lines[9].substr(24, 14) == "|      4 MiB |");
  // Allocations: all = 1234609 -> thousands ("K").
  const std::string allocations = lines[6 + 5 * 4 + 1];
  REQUIRE(allocations.rfind("| Allocations", 0) == 0);
  CHECK(allocations.substr(24, 14) == "|    1234 K  |");
}

TEST_CASE("abbreviated summary drops the pool rows") {
  const std::string text = memory_summary(sample_stats(), 0, true);
  CHECK(text.find("from large pool") == std::string::npos);
  CHECK(text.find("Non-releasable allocs") != std::string::npos);
}

TEST_CASE("the fragless section lists every field torch's table does not show") {
  const std::string text = memory_summary(sample_stats(), 0);
  for (const stat_field& field : stat_fields()) {
    if (field.kind == stat_field_kind::group) continue;
    if (field.name == "oversize_allocations" || field.name == "oversize_segments" || field.name == "num_ooms" ||
        field.name == "num_alloc_retries")
      continue;
    INFO(field.name);
    CHECK(text.find("| " + std::string(field.name) + " ") != std::string::npos);
  }
  // fragmentation: unused = 4GiB + 8MiB - (3GiB + 4MiB) = 1028 MiB; largest free 512 MiB.
  const double expected = 1.0 - 512.0 / 1028.0;
  char percent[32];
  std::snprintf(percent, sizeof percent, "%.1f %%", expected * 100);
  CHECK(text.find(percent) != std::string::npos);
  CHECK(text.find("| max_split_size                        |                             0 B   |") !=
        std::string::npos);
  device_stats unlimited = sample_stats();
  unlimited.max_split_size = -1;
  CHECK(memory_summary(unlimited, 0).find("| max_split_size                        |                         unlimited |") !=
        std::string::npos);
}
