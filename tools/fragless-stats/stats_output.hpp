// Machine-readable renderings of live readings shared by `list` and `PID` views, all
// from the stats field list (flatten()): JSON documents and CSV rows. Note [CLI JSON]:
//   list:  {"schema": "fragless.process_list/1", "processes": [PROCESS...],
//           "errors": [{"file": NAME, "error": TEXT}...]}
//   PID:   {"schema": "fragless.process_stats/1", PROCESS fields...}
//   PROCESS = {"pid": N, "command": TEXT, "devices": [{"device": N, "published_ns": N,
//              "stats": {<flat key>: number, ... as in "fragless.stats/1">}}]}
// CSV: header "pid,command,device,published_ns,<flat keys...>", one row per device.
#pragma once

#include <string>
#include <vector>

#include "json.hpp"
#include "stats_page_reader.hpp"

namespace fragless::cli {

json::value process_json(long pid, const std::string& command, const std::vector<stats_reader::device_reading>& devices);
std::string csv_header();
std::string csv_rows(long pid, const std::string& command, const std::vector<stats_reader::device_reading>& devices);

}  // namespace fragless::cli
