// bench_options: the command line of fragless-bench, parsed once into one struct.
// Invariant: every option is listed in option_help() with its default; a bad value is a
// usage error (exit 2) naming the option, never a silent default.
#pragma once

#include "device_setup.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace fragless::bench {

struct bench_options {
  std::string command;                   // replay | builtin | main | convert | replay-one | micro | ...
  std::vector<std::string> positional;   // files / workload specs / convert input
  std::vector<std::string> allocators;   // empty = all default peers
  std::vector<std::pair<std::string, std::string>> named_configurations;  // --conf NAME=SPEC
  int repetitions = 3;
  bool smoke = false;
  std::size_t max_events = 0;
  std::optional<std::uint64_t> capacity_bytes;
  std::uint64_t device_call_ns = 0;
  std::uint64_t host_work_ns = 0;  // Note [Host work]
  bool max_fit = false;
  std::string json_path, csv_path, plot_path, output_path, out_dir;
  std::string traces_dir;
  bool progress = false;
  bool no_table = false;
  bool verbose = false;  // children's stderr (allocator warnings, simcuda messages) shown
  int timeout_seconds = 600;
  // Note [Cost model]: prices of device calls (empty = the compiled-in default table).
  std::string cost_table_path;
  // corpus / generate.
  std::uint64_t seeds = 0;               // corpus: seeds per family
  std::uint64_t first_seed = 1;          // corpus: seeds first_seed .. first_seed + seeds - 1
  std::uint64_t seed = 1;                // generate
  std::vector<std::string> families;     // corpus: empty = every family
  int jobs = 2;                          // corpus: replays run at once
  std::string markdown_path;             // corpus: the per-family tables as markdown
  bool layout_threads = false;           // layout: with the layout's own threads, wall time
  std::string call_log_dir;              // Note [Call log]: one CSV per replay here (empty: none)
  // replay-one only.
  std::string source, allocator, configuration;
  std::string call_log_path;  // Note [Call log]: this replay's CSV (empty: none)
  // Not from the command line: how this run drives the device (prepare_device, once).
  device_setup device;
};

// Throws std::invalid_argument with a one-line message on a usage error.
bench_options parse_bench_options(int argc, char** argv);
std::string usage_text();

// "24GiB", "512MiB", "1.5GB", "1000000" -> bytes, as FRAGLESS_CONF sizes are read
// (Note [Size units] in fragless/options.hpp; no "unlimited", not 0). Throws
// std::invalid_argument.
std::uint64_t parse_size(const std::string& text);

}  // namespace fragless::bench
