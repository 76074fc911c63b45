// format_text: the human table and the machine formats (JSON, CSV) from row_fields().
// Invariant: JSON strings are escaped; numbers are finite or null.
#include "outputs.hpp"

#include "fragless/options.hpp"
#include "json.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <utility>

namespace fragless::bench {

namespace {

std::string number_text(double value, field_kind kind) {
  char buffer[64];
  switch (kind) {
    case field_kind::bytes: return format_bytes_readable(value);
    case field_kind::ratio: std::snprintf(buffer, sizeof buffer, "%.3f", value); return buffer;
    case field_kind::nanoseconds: std::snprintf(buffer, sizeof buffer, "%.0f", value); return buffer;
    case field_kind::count: std::snprintf(buffer, sizeof buffer, "%.0f", value); return buffer;
    case field_kind::text: break;
  }
  return {};
}

std::string raw_number(double value) {
  char buffer[64];
  if (std::floor(value) == value && std::fabs(value) < 9.0e15) {
    std::snprintf(buffer, sizeof buffer, "%.0f", value);
  } else {
    std::snprintf(buffer, sizeof buffer, "%.6g", value);
  }
  return buffer;
}

std::string csv_escape(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace

// Note [Summary rows]
// A geometric mean compares allocators only over the same traces. Summary rows therefore
// average over the "common" traces: those on which every replayed allocator that ran ok
// anywhere also ran ok here. "pytorch-recorded" (not a replay) averages over the common
// traces that carry a record. The row's name says how many traces it covers.
std::vector<result_row> with_summary_rows(const std::vector<result_row>& rows) {
  std::vector<result_row> out = rows;
  std::vector<std::string> order;
  std::map<std::string, int> failed_rows, ok_rows;
  for (const result_row& row : rows) {
    if (failed_rows.count(row.allocator) == 0 && ok_rows.count(row.allocator) == 0) order.push_back(row.allocator);
    ++(row.ok() ? ok_rows[row.allocator] : failed_rows[row.allocator]);
  }
  auto counts_for_common = [&](const std::string& allocator) {
    return allocator != "pytorch-recorded" && ok_rows[allocator] > 0;
  };
  // Traces where every counted allocator is ok.
  std::map<std::string, bool> common;
  for (const result_row& row : rows) {
    if (common.count(row.trace) == 0) common[row.trace] = true;
    if (counts_for_common(row.allocator) && !row.ok()) common[row.trace] = false;
  }
  for (const std::string& name : order) {
    double log_ratio = 0, log_ns = 0;
    int ratio_count = 0, ns_count = 0;
    for (const result_row& row : rows) {
      if (row.allocator != name || !row.ok() || !common[row.trace]) continue;
      if (row.ratio_to_ideal && *row.ratio_to_ideal > 0) {
        log_ratio += std::log(*row.ratio_to_ideal);
        ++ratio_count;
      }
      if (row.host_ns_per_op && *row.host_ns_per_op > 0) {
        log_ns += std::log(*row.host_ns_per_op);
        ++ns_count;
      }
    }
    result_row summary;
    summary.trace = "geomean (" + std::to_string(ratio_count) + " common traces)";
    summary.allocator = name;
    if (ratio_count > 0) summary.ratio_to_ideal = std::exp(log_ratio / ratio_count);
    if (ns_count > 0) summary.host_ns_per_op = std::exp(log_ns / ns_count);
    const int failed = failed_rows[name];
    summary.status = failed == 0 ? "ok" : "summary (" + std::to_string(failed) + " rows not ok)";
    if (ok_rows[name] == 0) summary.status = "no ok rows";
    out.push_back(summary);
  }
  return out;
}

std::string format_table(const std::vector<result_row>& rows) {
  std::vector<const row_field*> columns;
  for (const row_field& f : row_fields()) {
    if (f.table_header != nullptr) columns.push_back(&f);
  }
  std::vector<std::vector<std::string>> cells;
  cells.emplace_back();
  for (const row_field* f : columns) cells.back().push_back(f->table_header);
  for (const result_row& row : rows) {
    cells.emplace_back();
    for (const row_field* f : columns) {
      if (f->text_member != nullptr) {
        cells.back().push_back(row.*(f->text_member));
      } else {
        const std::optional<double>& value = row.*(f->number_member);
        cells.back().push_back(value ? number_text(*value, f->kind) : "-");
      }
    }
  }
  std::vector<std::size_t> widths(columns.size(), 0);
  for (const auto& line : cells) {
    for (std::size_t c = 0; c < line.size(); ++c) widths[c] = std::max(widths[c], line[c].size());
  }
  std::string out;
  std::string previous_trace;
  for (std::size_t r = 0; r < cells.size(); ++r) {
    // A blank line between traces; the summary rows form one group.
    const std::string group = cells[r][0].rfind("geomean", 0) == 0 ? "geomean" : cells[r][0];
    if (r > 0 && group != previous_trace) {
      if (r > 1) out += '\n';
      previous_trace = group;
    }
    for (std::size_t c = 0; c < cells[r].size(); ++c) {
      const bool left = columns[c]->kind == field_kind::text;
      const std::string& text = cells[r][c];
      const std::string pad(widths[c] - text.size(), ' ');
      out += left ? text + pad : pad + text;
      out += c + 1 == cells[r].size() ? "\n" : "  ";
    }
    if (r == 0) {
      std::size_t total = 0;
      for (std::size_t w : widths) total += w + 2;
      out += std::string(total - 2, '-') + "\n";
    }
  }
  return out;
}

std::string format_json(const std::vector<result_row>& rows) {
  std::string out = "[\n";
  for (std::size_t r = 0; r < rows.size(); ++r) {
    out += "  {";
    bool first = true;
    for (const row_field& f : row_fields()) {
      out += first ? "" : ", ";
      first = false;
      out += json::quote(f.name) + ": ";
      if (f.text_member != nullptr) {
        out += json::quote(rows[r].*(f.text_member));
      } else {
        const std::optional<double>& value = rows[r].*(f.number_member);
        out += (value && std::isfinite(*value)) ? raw_number(*value) : "null";
      }
    }
    out += r + 1 == rows.size() ? "}\n" : "},\n";
  }
  return out + "]\n";
}

std::string format_report_json(const std::vector<result_row>& rows, const report_header& header) {
  std::string rows_json = format_json(rows);
  for (std::size_t at = rows_json.find('\n'); at != std::string::npos && at + 1 < rows_json.size();
       at = rows_json.find('\n', at + 2)) {
    rows_json.insert(at + 1, "  ");  // indent the list one level
  }
  while (!rows_json.empty() && rows_json.back() == '\n') rows_json.pop_back();
  return "{\n  " + json::quote("device") + ": " + json::quote(header.device) + ",\n  " + json::quote("counting") + ": " +
         json::quote(header.counting) + ",\n  " + json::quote("capacity") + ": " + json::quote(header.capacity) +
         ",\n  " + json::quote("rows") + ": " + rows_json + "\n}\n";
}

std::string format_report_header(const report_header& header) {
  std::string out;
  for (const auto& [label, value] : {std::pair<const char*, const std::string*>{"device", &header.device},
                                     {"counting", &header.counting}, {"capacity", &header.capacity}}) {
    if (!value->empty()) out += std::string(label) + ": " + *value + "\n";
  }
  return out;
}

std::string format_csv(const std::vector<result_row>& rows) {
  std::string out;
  bool first = true;
  for (const row_field& f : row_fields()) {
    out += first ? "" : ",";
    first = false;
    out += f.name;
  }
  out += "\n";
  for (const result_row& row : rows) {
    first = true;
    for (const row_field& f : row_fields()) {
      out += first ? "" : ",";
      first = false;
      if (f.text_member != nullptr) {
        out += csv_escape(row.*(f.text_member));
      } else {
        const std::optional<double>& value = row.*(f.number_member);
        if (value && std::isfinite(*value)) out += raw_number(*value);
      }
    }
    out += "\n";
  }
  return out;
}

}  // namespace fragless::bench
