// outputs: every way a list of result rows leaves the program (table, JSON, CSV, SVG plot),
// the geometric-mean summary rows, and the all-or-nothing file writer.
// Invariant: formats are driven by row_fields(); nothing here re-lists the fields.
#pragma once

#include "result_row.hpp"

#include <string>
#include <vector>

namespace fragless::bench {

// Appends one "geomean" row per allocator (over its ok rows that have a ratio).
std::vector<result_row> with_summary_rows(const std::vector<result_row>& rows);

// What the run was measured on (device_setup's lines): the report's header.
struct report_header {
  std::string device;    // "real GPU (NVIDIA H100 ...)" | "simcuda (...)"
  std::string counting;  // how device calls and bytes in use were measured
  std::string capacity;  // the device capacity and the fit rows' capacity
};

std::string format_table(const std::vector<result_row>& rows);
std::string format_json(const std::vector<result_row>& rows);  // a JSON list of row objects
// results.json: {"device": ..., "counting": ..., "capacity": ..., "rows": format_json(rows)}
std::string format_report_json(const std::vector<result_row>& rows, const report_header& header);
// "device: ...", "counting: ...", "capacity: ..." lines above a table (empty ones left out).
std::string format_report_header(const report_header& header);
std::string format_csv(const std::vector<result_row>& rows);
// One panel per trace: live bytes and each allocator's reserved bytes over the trace.
std::string format_svg_plot(const std::vector<result_row>& rows, const std::string& title);

// Writes to `path`.tmp then renames; throws std::runtime_error naming the path on failure.
void write_file_atomically(const std::string& path, const std::string& contents);

}  // namespace fragless::bench
