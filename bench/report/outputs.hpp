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

std::string format_table(const std::vector<result_row>& rows);
std::string format_json(const std::vector<result_row>& rows);  // a JSON list of row objects
std::string format_csv(const std::vector<result_row>& rows);
// One panel per trace: live bytes and each allocator's reserved bytes over the trace.
std::string format_svg_plot(const std::vector<result_row>& rows, const std::string& title);

// Writes to `path`.tmp then renames; throws std::runtime_error naming the path on failure.
void write_file_atomically(const std::string& path, const std::string& contents);

}  // namespace fragless::bench
