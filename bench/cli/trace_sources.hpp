// trace_sources: where traces come from. A source is "file:PATH" or "builtin:SPEC", a string
// a child process can load by itself; the shared reference traces are found at
// <repo>/../shared/traces unless --traces says otherwise.
// Invariant: listing is sorted, so every run visits traces in the same order.
#pragma once

#include "traces/trace.hpp"

#include <string>
#include <vector>

namespace fragless::bench {

traces::trace load_source(const std::string& source);

// The default shared traces directory (may not exist).
std::string default_traces_dir();
// Every trace file under `dir` (snapshots, CSVs, fragless-trace files), sorted.
std::vector<std::string> list_trace_files(const std::string& dir);
// `path` relative to `dir` when inside it, else `path`.
std::string display_name(const std::string& path, const std::string& dir);

}  // namespace fragless::bench
