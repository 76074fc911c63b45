// run_matrix: the parent's job: every input x every allocator, each in a child process,
// plus the rows read from the inputs themselves ("pytorch-recorded") and, for built-in
// workloads, the largest batch that fits. Produces rows; printing is the caller's job.
// Invariant: every requested (input, allocator) pair yields exactly one row, whatever
// happened to the replay (Note [One child per replay]).
#pragma once

#include "bench_options.hpp"
#include "report/result_row.hpp"

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

// Any row whose status is a failure or an overlap.
bool any_failure(const std::vector<result_row>& rows);

}  // namespace fragless::bench
