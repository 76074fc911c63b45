// run_matrix: the parent's job: every input x every allocator, each in a child process,
// plus the rows read from the inputs themselves ("pytorch-recorded") and, for built-in
// workloads, the largest batch that fits. Produces rows; printing is the caller's job.
// Invariant: every requested (input, allocator) pair yields exactly one row, whatever
// happened to the replay (Note [One child per replay]).
#pragma once

#include "bench_options.hpp"
#include "cost/cost_table.hpp"
#include "report/result_row.hpp"

#include "traces/trace.hpp"

#include <string>
#include <vector>

namespace fragless::bench {

struct bench_input {
  std::string source;   // file:PATH | builtin:SPEC
  std::string display;  // name in reports
};

// Loads every input once in the parent (validating it: a bad input throws before any
// replay starts) and runs the matrix.
std::vector<result_row> run_matrix(const std::vector<bench_input>& inputs, const bench_options& options);

// The allocator rows requested: --allocators (or all), plus fragless[NAME] per --conf and
// fragless[env] when FRAGLESS_CONF is set.
std::vector<std::pair<std::string, std::string>> requested_allocators(const bench_options& options);

// The prices --cost-table names (warnings to stderr), or the default table.
cost_table selected_cost_table(const bench_options& options);

// One (input, allocator) replay in a child process, as a row (ratio over `ideal_bytes`,
// estimated allocator times at `prices`).
result_row replay_row(const bench_input& input, const std::string& allocator, const std::string& configuration,
                      const bench_options& options, std::uint64_t ideal_bytes, const cost_table& prices);

// The idealized packer's row for a trace (replay/ideal_packer.hpp): peak mapped bytes as
// its reserved bytes, page maps and unmaps as its device maps and unmaps.
result_row packer_row(const std::string& display, const traces::trace& t, std::size_t event_limit,
                      std::uint64_t ideal_bytes);
inline constexpr const char* packer_row_name = "ideal-packer";

// Any row whose status is a failure or an overlap.
bool any_failure(const std::vector<result_row>& rows);

}  // namespace fragless::bench
