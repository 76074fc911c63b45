// result_row: the field list (see header).
#include "result_row.hpp"

#include <cstdio>
#include <sstream>

namespace fragless::bench {

const std::vector<row_field>& row_fields() {
  using r = result_row;
  static const std::vector<row_field> fields = {
      {"trace", "trace", field_kind::text, &r::trace, nullptr},
      {"allocator", "allocator", field_kind::text, &r::allocator, nullptr},
      {"peak_reserved_bytes", "peak reserved", field_kind::bytes, nullptr, &r::peak_reserved_bytes},
      {"ideal_bytes", "ideal", field_kind::bytes, nullptr, &r::ideal_bytes},
      {"ratio_to_ideal", "x ideal", field_kind::ratio, nullptr, &r::ratio_to_ideal},
      {"reserved_minus_allocated_at_peak_bytes", "unused@peak", field_kind::bytes, nullptr,
       &r::reserved_minus_allocated_at_peak_bytes},
      {"host_ns_per_op", "ns/op", field_kind::nanoseconds, nullptr, &r::host_ns_per_op},
      {"longest_op_ns", nullptr, field_kind::nanoseconds, nullptr, &r::longest_op_ns},
      {"emulation_ns_per_op", nullptr, field_kind::nanoseconds, nullptr, &r::emulation_ns_per_op},
      {"device_calls", "dev calls", field_kind::count, nullptr, &r::device_calls},
      {"steady_calls", "calls/step", field_kind::count, nullptr, &r::steady_calls},
      {"last_calling_pass", nullptr, field_kind::count, nullptr, &r::last_calling_pass},
      {"calls_by_pass", nullptr, field_kind::text, &r::calls_by_pass, nullptr},
      {"host_ns_by_pass", nullptr, field_kind::text, &r::host_ns_by_pass, nullptr},
      {"estimated_first_pass_ns", "est. 1st pass", field_kind::nanoseconds, nullptr, &r::estimated_first_pass_ns},
      {"estimated_steady_pass_ns", "est. steady", field_kind::nanoseconds, nullptr, &r::estimated_steady_pass_ns},
      {"estimated_steady_fraction_of_wall", "est./wall", field_kind::ratio, nullptr,
       &r::estimated_steady_fraction_of_wall},
      {"syncs", "syncs", field_kind::count, nullptr, &r::syncs},
      {"ooms", "OOMs", field_kind::count, nullptr, &r::ooms},
      {"max_fitting_batch", "max batch", field_kind::count, nullptr, &r::max_fitting_batch},
      {"status", "status", field_kind::text, &r::status, nullptr},
      {"peak_live_bytes", nullptr, field_kind::bytes, nullptr, &r::peak_live_bytes},
      {"device_allocs", nullptr, field_kind::count, nullptr, &r::device_allocs},
      {"device_frees", nullptr, field_kind::count, nullptr, &r::device_frees},
      {"device_maps", nullptr, field_kind::count, nullptr, &r::device_maps},
      {"device_unmaps", nullptr, field_kind::count, nullptr, &r::device_unmaps},
      {"events", nullptr, field_kind::count, nullptr, &r::events},
      {"device_used_peak_bytes", nullptr, field_kind::bytes, nullptr, &r::device_used_peak_bytes},
      {"notes", nullptr, field_kind::text, &r::notes, nullptr},
  };
  return fields;
}

std::string pass_list(const std::vector<double>& values, int digits) {
  std::string out;
  char buffer[64];
  for (double value : values) {
    std::snprintf(buffer, sizeof buffer, "%.*f", digits, value);
    out += (out.empty() ? "" : " ") + std::string(buffer);
  }
  return out;
}

std::vector<double> parse_pass_list(const std::string& text) {
  std::vector<double> values;
  std::istringstream in(text);
  for (double value; in >> value;) values.push_back(value);
  return values;
}

}  // namespace fragless::bench
