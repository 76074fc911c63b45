// cost_table: parsing, defaults, pricing (see header and Note [Cost model]).
#include "cost_table.hpp"

#include "traces/text_trace.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <sstream>

namespace fragless::bench {

// The data file's text, compiled in by CMake (device_call_costs_data.cpp.in).
extern const char* const default_cost_table_text;

namespace {

constexpr std::string_view table_magic = "fragless-costs 1";
constexpr std::uint64_t default_map_size_bytes = std::uint64_t{2} << 20;

enum costed_index : std::size_t {
  cuda_malloc, cuda_free, mem_create, mem_release, mem_map, mem_unmap, mem_set_access, address_reserve, address_free,
  event_record, stream_wait_event, event_query
};
// Note [Cost model]: the calls priced without a size.
constexpr std::uint64_t sizeless_call_bytes = 1;

bool parse_number(std::string_view text, std::uint64_t& out) {
  if (text.empty()) return false;
  const auto result = std::from_chars(text.data(), text.data() + text.size(), out);
  return result.ec == std::errc() && result.ptr == text.data() + text.size();
}

std::vector<std::string_view> split_spaces(std::string_view line) {
  std::vector<std::string_view> words;
  std::size_t start = 0;
  while (start < line.size()) {
    while (start < line.size() && (line[start] == ' ' || line[start] == '\t')) ++start;
    std::size_t end = start;
    while (end < line.size() && line[end] != ' ' && line[end] != '\t') ++end;
    if (end > start) words.push_back(line.substr(start, end - start));
    start = end;
  }
  return words;
}

}  // namespace

const std::array<const char*, costed_function_count>& costed_functions() {
  static const std::array<const char*, costed_function_count> names = {
      "cudaMalloc", "cudaFree", "cuMemCreate", "cuMemRelease", "cuMemMap", "cuMemUnmap", "cuMemSetAccess",
      "cuMemAddressReserve", "cuMemAddressFree", "cudaEventRecord", "cudaStreamWaitEvent", "cudaEventQuery"};
  return names;
}

double cost_table::price_ns(std::size_t index, std::uint64_t size_bytes) const {
  const std::vector<cost_point>& p = points.at(index);
  if (p.empty()) return 0.0;
  if (p.size() == 1 || size_bytes <= p.front().size_bytes) return p.front().nanoseconds;
  std::size_t upper = 1;
  while (upper + 1 < p.size() && p[upper].size_bytes < size_bytes) ++upper;
  const cost_point& a = p[upper - 1];
  const cost_point& b = p[upper];
  const double slope = (b.nanoseconds - a.nanoseconds) / static_cast<double>(b.size_bytes - a.size_bytes);
  return std::max(0.0, a.nanoseconds + slope * (static_cast<double>(size_bytes) - static_cast<double>(a.size_bytes)));
}

cost_table parse_cost_table(std::string_view text, const std::string& name, std::vector<std::string>& warnings) {
  const cost_table* defaults = text.data() == default_cost_table_text ? nullptr : &default_cost_table();
  cost_table table;
  std::size_t line_number = 0;
  bool saw_magic = false;
  std::size_t start = 0;
  auto warn = [&](const std::string& reason) {
    warnings.push_back(name + ":" + std::to_string(line_number) + ": " + reason);
  };
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::vector<std::string_view> words = split_spaces(line);
    if (words.empty() || words[0][0] == '#') continue;
    if (!saw_magic) {
      if (line != table_magic) {
        warn("not a cost table (the first line must be '" + std::string(table_magic) + "'); using the default table");
        return defaults != nullptr ? *defaults : table;
      }
      saw_magic = true;
      continue;
    }
    if (words[0] == "device") {
      table.device = words.size() < 2 ? std::string() : std::string(line.substr(static_cast<std::size_t>(words[1].data() - line.data())));
      continue;
    }
    const auto& functions = costed_functions();
    const auto found = std::find_if(functions.begin(), functions.end(), [&](const char* f) { return words[0] == f; });
    if (found == functions.end()) {
      warn("unknown function '" + std::string(words[0]) + "' (line ignored)");
      continue;
    }
    std::uint64_t size = 0, nanoseconds = 0;
    if (words.size() < 3 || !parse_number(words[1], size) || !parse_number(words[2], nanoseconds) || size == 0 ||
        size > (std::uint64_t{1} << 50) || nanoseconds > 10'000'000'000ULL) {
      warn("needs 'FUNCTION BYTES NANOSECONDS' with 1 <= BYTES <= 1 PiB and NANOSECONDS <= 1e10 (line ignored)");
      continue;
    }
    if (words.size() > 3 && words[3][0] != '#') {
      warn("trailing text after the price (line ignored)");
      continue;
    }
    auto& p = table.points[static_cast<std::size_t>(found - functions.begin())];
    if (std::any_of(p.begin(), p.end(), [&](const cost_point& c) { return c.size_bytes == size; })) {
      warn("a second price for " + std::string(words[0]) + " at " + std::to_string(size) + " bytes (line ignored)");
      continue;
    }
    p.push_back(cost_point{size, static_cast<double>(nanoseconds)});
  }
  if (!saw_magic) {
    warn("empty cost table; using the default table");
    return defaults != nullptr ? *defaults : table;
  }
  for (std::size_t i = 0; i < costed_function_count; ++i) {
    auto& p = table.points[i];
    std::sort(p.begin(), p.end(), [](const cost_point& a, const cost_point& b) { return a.size_bytes < b.size_bytes; });
    if (p.empty() && defaults != nullptr) {
      warnings.push_back(name + ": no price for " + std::string(costed_functions()[i]) + "; using the default table's");
      p = defaults->points[i];
    }
  }
  return table;
}

const cost_table& default_cost_table() {
  static const cost_table table = [] {
    std::vector<std::string> warnings;
    cost_table parsed = parse_cost_table(default_cost_table_text, "device_call_costs.txt", warnings);
    for (const std::string& w : warnings) std::fprintf(stderr, "fragless-bench: default cost table: %s\n", w.c_str());
    return parsed;
  }();
  return table;
}

cost_table load_cost_table(const std::string& path, std::vector<std::string>& warnings) {
  std::string text;
  try {
    text = traces::read_file_bytes(path);
  } catch (const std::exception& e) {
    warnings.push_back(std::string(e.what()) + "; using the default cost table");
    return default_cost_table();
  }
  return parse_cost_table(text, path, warnings);
}

std::string format_cost_table(const cost_table& table, const std::string& header_comment) {
  std::ostringstream out;
  out << table_magic << "\n";
  std::istringstream comment(header_comment);
  for (std::string line; std::getline(comment, line);) out << "# " << line << "\n";
  out << "device " << table.device << "\n";
  for (std::size_t i = 0; i < costed_function_count; ++i) {
    for (const cost_point& p : table.points[i]) {
      out << costed_functions()[i] << " " << p.size_bytes << " " << static_cast<std::uint64_t>(p.nanoseconds + 0.5) << "\n";
    }
  }
  return out.str();
}

double estimated_allocator_ns(const pass_activity& pass, const cost_table& table) {
  const auto& c = pass.calls;
  const std::uint64_t obtains = c[cuda_malloc] + c[mem_create];
  const std::uint64_t returns = c[cuda_free] + c[mem_release];
  const std::uint64_t obtain_size = obtains == 0 ? default_map_size_bytes : std::max<std::uint64_t>(1, pass.obtained_bytes / obtains);
  const std::uint64_t return_size = returns == 0 ? default_map_size_bytes : std::max<std::uint64_t>(1, pass.returned_bytes / returns);
  double total = static_cast<double>(pass.host_ns);
  for (std::size_t i = 0; i < costed_function_count; ++i) {
    if (c[i] == 0) continue;
    std::uint64_t size = obtain_size;
    if (i == cuda_free || i == mem_release) size = return_size;
    if (i == address_reserve || i == address_free) size = default_map_size_bytes;
    if (i == event_record || i == stream_wait_event || i == event_query) size = sizeless_call_bytes;
    total += static_cast<double>(c[i]) * table.price_ns(i, size);
  }
  return total;
}

}  // namespace fragless::bench
