// result_row: one (trace, allocator) result, and the one field list that the table, the
// JSON, the CSV and the child-process protocol are all generated from (no second copy).
// Invariant: a numeric field that does not apply (e.g. host time of "pytorch-recorded")
// is empty (std::nullopt) and prints as "-", null, or an empty CSV cell.
#pragma once

#include "replay/replayer.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fragless::bench {

struct result_row {
  std::string trace;
  std::string allocator;
  std::string status = "ok";  // ok | not built: ... | failed: ... | overlap: ... | oom at capacity
  std::optional<double> peak_reserved_bytes;
  std::optional<double> ideal_bytes;
  std::optional<double> ratio_to_ideal;
  std::optional<double> host_ns_per_op;
  std::optional<double> longest_op_ns;  // the longest single call (Note [Host work])
  // simcuda's time emulating priced device calls, per op: not in host_ns_per_op
  // (Note [Host time without emulation]); empty where nothing was timed (a real GPU)
  std::optional<double> emulation_ns_per_op;
  std::optional<double> device_calls;
  std::optional<double> syncs;
  std::optional<double> steady_calls;  // Note [Steady state]: device calls of the last repetition
  std::optional<double> last_calling_pass;  // Note [Steady state]: the last repetition that called
  // Note [Steady state]: per repetition, space-separated (pass_list): device calls, and host
  // ns per operation (host_ns_per_op is their median); empty where not measured.
  std::string calls_by_pass;
  std::string host_ns_by_pass;
  // Note [Cost model]: host time + device calls at their prices, first and last repetition.
  std::optional<double> estimated_first_pass_ns;
  std::optional<double> estimated_steady_pass_ns;
  // The steady pass's estimate over the trace's recorded wall time (timestamped snapshots).
  std::optional<double> estimated_steady_fraction_of_wall;
  std::optional<double> reserved_minus_allocated_at_peak_bytes;
  std::optional<double> peak_live_bytes;
  std::optional<double> device_allocs;
  std::optional<double> device_frees;
  std::optional<double> device_maps;
  std::optional<double> device_unmaps;
  std::optional<double> ooms;
  std::optional<double> events;
  std::optional<double> device_used_peak_bytes;
  std::optional<double> max_fitting_batch;
  std::string notes;
  std::vector<timeline_point> timeline;  // for plots; not a field

  bool ok() const { return status == "ok"; }
};

enum class field_kind { text, bytes, count, ratio, nanoseconds };

struct row_field {
  const char* name;          // JSON key, CSV header, child protocol key
  const char* table_header;  // nullptr = not in the table
  field_kind kind;
  std::string result_row::*text_member;              // text fields
  std::optional<double> result_row::*number_member;  // numeric fields
};

// The field list, in output order.
const std::vector<row_field>& row_fields();

// A per-repetition figure as a text field: the values space-separated, with `digits`
// decimals; and back (a value that does not parse ends the list).
std::string pass_list(const std::vector<double>& values, int digits);
std::vector<double> parse_pass_list(const std::string& text);

}  // namespace fragless::bench
