// cost_table: the price of each device call by size (Note [Cost model]), read from one
// data file (bench/cost/device_call_costs.txt, compiled in as the default table) or from
// a file `fragless-bench calibrate` wrote (--cost-table FILE).
// Invariant: every function in costed_functions() has at least one price point after
// loading: a bad or missing line warns (FILE:LINE: reason) and that function keeps the
// default table's points; loading never throws on bad content.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fragless::bench {

// Note [Cost model]
// Estimated allocator time of a pass over a workload = the host time the replay measured
// inside allocate/free calls (on simcuda less its emulation of the device calls, Note [Host
// time without emulation] in replay/device_counters.hpp) + every device call the allocator
// made during the pass, each at its price from the table. simcuda counts calls per
// function but not their sizes; sizes are inferred: the bytes a pass
// obtained (simcuda's bytes-in-use going up) over its cudaMalloc + cuMemCreate calls give
// their mean size, the bytes it returned over cudaFree + cuMemRelease theirs, and map,
// unmap and access calls are priced at the mean obtained size (one 2 MiB page when the
// pass obtained nothing). Prices are linear in size between table points, so pricing a
// count at the mean size is exact within one segment of the table.
// The calls that order one stream after another (cudaEventRecord, cudaStreamWaitEvent,
// cudaEventQuery: Note [Stream reuse], Note [Shared records] in the allocator) have no size:
// one price each, the table's point at 1 byte. They are priced, and their emulation left
// out of host time, like every other device call: an allocator that reuses memory across
// streams makes them where one that keeps each stream's memory apart makes none, and
// a real GPU charges about 200 ns each (docs/cost_model.md). They are not device calls in
// the device-call counts (device_call_counts), which are the memory calls.

inline constexpr std::size_t costed_function_count = 12;
// The priced functions, in the order of every per-function array.
const std::array<const char*, costed_function_count>& costed_functions();

struct cost_point {
  std::uint64_t size_bytes = 0;
  double nanoseconds = 0;
};

struct cost_table {
  std::string device;  // what the prices are for ("device" line)
  std::array<std::vector<cost_point>, costed_function_count> points;  // sorted by size

  // Price of one call of function `index` on `size_bytes`.
  double price_ns(std::size_t index, std::uint64_t size_bytes) const;
};

// Parses table text; warnings ("NAME:LINE: reason") go to `warnings`.
cost_table parse_cost_table(std::string_view text, const std::string& name, std::vector<std::string>& warnings);
// The compiled-in default table.
const cost_table& default_cost_table();
// Reads a file (a missing file is one warning and the default table).
cost_table load_cost_table(const std::string& path, std::vector<std::string>& warnings);
std::string format_cost_table(const cost_table& table, const std::string& header_comment);

// What a replay pass did that the cost model prices.
struct pass_activity {
  std::uint64_t host_ns = 0;         // time inside allocate/free calls
  std::uint64_t obtained_bytes = 0;  // device bytes in use going up
  std::uint64_t returned_bytes = 0;  // device bytes in use going down
  std::array<std::uint64_t, costed_function_count> calls{};
};

// Host ns + every call at its price (Note [Cost model]).
double estimated_allocator_ns(const pass_activity& pass, const cost_table& table);

}  // namespace fragless::bench
