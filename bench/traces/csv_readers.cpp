// csv_readers: RMM and lifetime CSVs (see header).
#include "csv_readers.hpp"

#include "text_fields.hpp"
#include "trace_builder.hpp"

#include <algorithm>
#include <vector>

namespace fragless::traces {

namespace {


// Finds each wanted column in the header line, or throws naming the first missing one.
std::vector<std::size_t> find_columns(std::string_view header, const std::vector<std::string_view>& wanted,
                                      const std::string& name) {
  const std::vector<std::string_view> fields = split_fields(header, ',');
  std::vector<std::size_t> indices;
  for (std::string_view column : wanted) {
    auto found = std::find(fields.begin(), fields.end(), column);
    if (found == fields.end()) {
      throw trace_error(name + ":1: missing column '" + std::string(column) + "' in header '" + std::string(header) + "'");
    }
    indices.push_back(static_cast<std::size_t>(found - fields.begin()));
  }
  return indices;
}

std::string position(const std::string& name, std::size_t line, std::string_view column) {
  return name + ":" + std::to_string(line) + ": column '" + std::string(column) + "'";
}

bool blank(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

// The rows of a CSV whose header names the `wanted` columns (in any order, among others):
// calls row(line number, fields) for each non-blank line, fields[i] being wanted[i]'s.
// Throws trace_error on an empty file, a missing column or a short row.
template <typename Row>
void for_each_csv_row(std::string_view text, const std::string& name, const std::vector<std::string_view>& wanted,
                      Row&& row) {
  line_reader lines(text);
  std::string_view line;
  if (!lines.next(line) || blank(line)) throw trace_error(name + ":1: empty file (no header)");
  const std::vector<std::size_t> columns = find_columns(line, wanted, name);
  const std::size_t needed = *std::max_element(columns.begin(), columns.end()) + 1;
  std::vector<std::string_view> wanted_fields(columns.size());
  while (lines.next(line)) {
    if (blank(line)) continue;
    const std::size_t n = lines.line_number();
    const std::vector<std::string_view> fields = split_fields(line, ',');
    if (fields.size() < needed) {
      throw trace_error(name + ":" + std::to_string(n) + ": expected at least " + std::to_string(needed) + " fields");
    }
    for (std::size_t i = 0; i < columns.size(); ++i) wanted_fields[i] = fields[columns[i]];
    row(n, wanted_fields);
  }
}

}  // namespace

trace read_rmm_csv(std::string_view text, const std::string& name) {
  trace result;
  result.name = name;
  result.source_format = "rmm-csv";
  trace_builder builder(result);
  std::size_t failures = 0;
  for_each_csv_row(text, name, {"Action", "Pointer", "Size", "Stream"},
                   [&](std::size_t n, const std::vector<std::string_view>& fields) {
    const std::string_view action = fields[0];
    const std::string where = name + ":" + std::to_string(n);
    if (action == "allocate failure") {
      ++failures;
      return;
    }
    const std::uint64_t pointer = parse_unsigned(fields[1], position(name, n, "Pointer"), true);
    if (action == "allocate") {
      const std::uint64_t size = parse_unsigned(fields[2], position(name, n, "Size"));
      const std::uint64_t stream = parse_unsigned(fields[3], position(name, n, "Stream"), true);
      builder.alloc(pointer, size, stream, where);
    } else if (action == "free") {
      builder.free(pointer, where);
    } else {
      throw trace_error(where + ": unknown action '" + std::string(action) + "'");
    }
  });
  if (failures != 0) result.notes.push_back(std::to_string(failures) + " 'allocate failure' records not replayed");
  validate_trace(result);
  return result;
}

trace read_lifetime_csv(std::string_view text, const std::string& name) {
  trace result;
  result.name = name;
  result.source_format = "lifetime-csv";
  struct lifetime {
    std::int64_t lower;
    std::int64_t upper;
    std::uint64_t size_bytes;
  };
  std::vector<lifetime> buffers;
  std::size_t empty_lifetimes = 0;
  for_each_csv_row(text, name, {"id", "lower", "upper", "size"},
                   [&](std::size_t n, const std::vector<std::string_view>& fields) {
    lifetime b{parse_signed(fields[1], position(name, n, "lower")),
               parse_signed(fields[2], position(name, n, "upper")),
               parse_unsigned(fields[3], position(name, n, "size"))};
    if (b.upper < b.lower) throw trace_error(name + ":" + std::to_string(n) + ": upper is before lower");
    if (b.size_bytes == 0 || b.size_bytes > max_block_bytes) {
      throw trace_error(name + ":" + std::to_string(n) + ": absurd size " + std::to_string(b.size_bytes));
    }
    if (b.upper == b.lower) {
      ++empty_lifetimes;
      return;
    }
    buffers.push_back(b);
  });
  // (time, 0 = free / 1 = alloc, buffer index): frees first at equal times.
  struct edge {
    std::int64_t time;
    int is_alloc;
    std::size_t buffer;
  };
  std::vector<edge> edges;
  edges.reserve(buffers.size() * 2);
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    edges.push_back(edge{buffers[i].lower, 1, i});
    edges.push_back(edge{buffers[i].upper, 0, i});
  }
  std::sort(edges.begin(), edges.end(), [](const edge& a, const edge& b) {
    if (a.time != b.time) return a.time < b.time;
    if (a.is_alloc != b.is_alloc) return a.is_alloc < b.is_alloc;
    return a.buffer < b.buffer;
  });
  for (const edge& e : edges) {
    result.events.push_back(trace_event{e.is_alloc ? trace_op::alloc : trace_op::free, 0, e.buffer,
                                        buffers[e.buffer].size_bytes});
  }
  if (empty_lifetimes != 0) result.notes.push_back(std::to_string(empty_lifetimes) + " buffers with empty lifetimes skipped");
  validate_trace(result);
  return result;
}

}  // namespace fragless::traces
