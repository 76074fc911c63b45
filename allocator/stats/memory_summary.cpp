// memory_summary(): torch.cuda.memory_summary()'s boxed table, same layout and number
// formatting, fragless title; then a section listing every other field of
// stats_fields.def. Invariant: every line is exactly 77 characters ('|' + 75 + '|')
// unless a number is wider than its column (PyTorch's behaviour too).
#include <cmath>
#include <cstdio>
#include <string>

#include "fragless/stats.hpp"

namespace fragless {
namespace {

constexpr std::size_t table_width = 75;

std::int64_t floor_divide(std::int64_t value, std::int64_t divisor) {
  std::int64_t quotient = value / divisor;
  if ((value % divisor != 0) && ((value < 0) != (divisor < 0))) --quotient;
  return quotient;
}

// PyTorch's scaling: the prefix is chosen from the row's reference value (the "all" row):
// divide by `base` while the reference is at least `limit` and a larger prefix is left.
// `value` is divided the same number of times (rounding down); returns the prefix index.
std::size_t scale_down(std::int64_t& value, std::int64_t reference, std::int64_t base, double limit,
                       std::size_t prefix_count) {
  std::size_t prefix = 0;
  double reference_value = static_cast<double>(reference);
  for (std::size_t next = 1; next < prefix_count; ++next) {
    if (reference_value < limit) break;
    prefix = next;
    value = floor_divide(value, base);
    reference_value /= static_cast<double>(base);
  }
  return prefix;
}

// "%6d UNIT", as PyTorch's _format_size.
std::string format_size(std::int64_t value, std::int64_t reference) {
  static constexpr const char* prefixes[] = {"B  ", "KiB", "MiB", "GiB", "TiB", "PiB"};
  const std::size_t prefix = scale_down(value, reference, 1024, 768 * 1024, 6);
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%6lld %s", static_cast<long long>(value), prefixes[prefix]);
  return buffer;
}

// "%7d P ", as PyTorch's _format_count.
std::string format_count(std::int64_t value, std::int64_t reference) {
  static constexpr const char* prefixes[] = {" ", "K", "M"};
  const std::size_t prefix = scale_down(value, reference, 1000, 750 * 1000, 3);
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%7lld %s ", static_cast<long long>(value), prefixes[prefix]);
  return buffer;
}

std::string pad_right(std::string text, std::size_t width) {
  if (text.size() < width) text.append(width - text.size(), ' ');
  return text;
}

void add_line(std::string& out, const std::string& line) { out += "|" + line + "|\n"; }

struct metric_row {
  const pool_stat* values;
  const char* name;
  bool is_bytes;
};

void add_stat_line(std::string& out, const std::string& name, const stat& s, const stat& reference, bool is_bytes) {
  const auto format = [&](std::int64_t v, std::int64_t r) { return is_bytes ? format_size(v, r) : format_count(v, r); };
  // Appended, not `" " + std::string`: GCC 12 at -O3 reports a false -Wrestrict there.
  std::string line(" ");
  line.append(pad_right(name, 21)).append(" | ").append(format(s.current, reference.current)).append(" | ");
  line.append(format(s.peak, reference.peak)).append(" | ").append(format(s.allocated, reference.allocated));
  line.append(" | ").append(format(s.freed, reference.freed)).append(" ");
  add_line(out, line);
}

// One value of the fragless section, by the field's unit.
std::string format_figure(stat_unit unit, double value) {
  char buffer[96];
  switch (unit) {
    case stat_unit::bytes:
      if (value < 0) return std::to_string(static_cast<long long>(value)) + " B";
      return format_size(static_cast<std::int64_t>(value), static_cast<std::int64_t>(value));
    case stat_unit::ratio: std::snprintf(buffer, sizeof buffer, "%.1f %%", value * 100.0); return buffer;
    case stat_unit::nanoseconds: std::snprintf(buffer, sizeof buffer, "%.3f ms", value / 1e6); return buffer;
    case stat_unit::count: break;
  }
  return std::to_string(static_cast<long long>(value));
}

// Fields the PyTorch table already shows.
bool shown_in_pytorch_table(std::string_view name) {
  return name == "oversize_allocations" || name == "oversize_segments" || name == "num_ooms" ||
         name == "num_alloc_retries";
}

}  // namespace

std::string memory_summary(const device_stats& stats, int device, bool abbreviated) {
  std::string out;
  const std::string rule_heavy(table_width, '=');
  const std::string rule_light(table_width, '-');
  char buffer[256];

  add_line(out, rule_heavy);
  std::snprintf(buffer, sizeof buffer, " %16s fragless CUDA memory summary, device ID %-16d ", "", device);
  add_line(out, buffer);
  add_line(out, rule_light);
  std::snprintf(buffer, sizeof buffer, "  %9s CUDA OOMs: %-12lld | %6s cudaMalloc retries: %-8lld  ", "",
                static_cast<long long>(stats.num_ooms), "", static_cast<long long>(stats.num_alloc_retries));
  add_line(out, buffer);
  add_line(out, rule_heavy);
  add_line(out, "        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  ");

  const metric_row rows[] = {
      {&stats.allocated_bytes, "Allocated memory", true},
      {&stats.active_bytes, "Active memory", true},
      {&stats.requested_bytes, "Requested memory", true},
      {&stats.reserved_bytes, "GPU reserved memory", true},
      {&stats.inactive_split_bytes, "Non-releasable memory", true},
      {&stats.allocation, "Allocations", false},
      {&stats.active, "Active allocs", false},
      {&stats.segment, "GPU reserved segments", false},
      {&stats.inactive_split, "Non-releasable allocs", false},
  };
  for (const metric_row& row : rows) {
    add_line(out, rule_light);
    const stat& all = (*row.values)[pool_all];
    add_stat_line(out, row.name, all, all, row.is_bytes);
    if (!abbreviated) {
      add_stat_line(out, "      from large pool", (*row.values)[pool_large], all, row.is_bytes);
      add_stat_line(out, "      from small pool", (*row.values)[pool_small], all, row.is_bytes);
    }
  }
  add_line(out, rule_light);
  add_stat_line(out, "Oversize allocations", stats.oversize_allocations, stats.oversize_allocations, false);
  add_line(out, rule_light);
  add_stat_line(out, "Oversize GPU segments", stats.oversize_segments, stats.oversize_segments, false);
  add_line(out, rule_heavy);

  // The fragless section: every other field of the list, by name, in list order.
  std::snprintf(buffer, sizeof buffer, " %-73s ", "fragless figures");
  add_line(out, buffer);
  add_line(out, rule_light);
  for (const stat_field& field : stat_fields()) {
    if (field.kind == stat_field_kind::group || shown_in_pytorch_table(field.name)) continue;
    std::string value_text;
    if (field.kind == stat_field_kind::single) {
      const auto current = flat_value(stats, std::string(field.name) + ".current").value_or(0);
      const auto peak = flat_value(stats, std::string(field.name) + ".peak").value_or(0);
      value_text = "cur " + format_figure(field.unit, current) + "  peak " + format_figure(field.unit, peak);
    } else {
      const double value = flat_value(stats, field.name).value_or(0);
      // A negative byte limit (max_split_size -1) means "no limit", as in PyTorch.
      const bool no_limit = field.kind == stat_field_kind::gauge && field.unit == stat_unit::bytes && value < 0;
      value_text = no_limit ? "unlimited" : format_figure(field.unit, value);
    }
    std::snprintf(buffer, sizeof buffer, " %-37.*s | %33s ", static_cast<int>(field.name.size()), field.name.data(),
                  value_text.c_str());
    add_line(out, buffer);
  }
  add_line(out, rule_heavy);
  return out;
}

}  // namespace fragless
