// fragless-bench: entry point and subcommand dispatch (see usage_text()).
// Invariant: bad input or usage gives one line on stderr and a non-zero exit, with no output
// file written; a replay failure or a detected overlap gives a complete report and exit 1.
#include "bench_options.hpp"
#include "child_runner.hpp"
#include "corpus_command.hpp"
#include "layout_command.hpp"
#include "cost/calibrate_backend.hpp"
#include "replay/device_counters.hpp"
#include "report/outputs.hpp"
#include "run_matrix.hpp"
#include "trace_sources.hpp"
#include "pickle_reader.hpp"
#include "traces/text_trace.hpp"
#include "workloads/workload.hpp"

#if FRAGLESS_BENCH_HAVE_MICRO
#include "micro/micro.hpp"
#endif

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

#ifndef FRAGLESS_SOURCE_DIR
#define FRAGLESS_SOURCE_DIR "."
#endif

namespace fragless::bench {

namespace {

report_header header_of(const bench_options& options) {
  return {options.device.device_line, options.device.counting_line, options.device.capacity_line};
}

void emit(const std::vector<result_row>& raw_rows, const bench_options& options, const std::string& title) {
  const std::vector<result_row> rows = with_summary_rows(raw_rows);
  const report_header header = header_of(options);
  if (!options.json_path.empty() && options.json_path != "-") {
    write_file_atomically(options.json_path, format_report_json(rows, header));
  }
  if (!options.csv_path.empty()) write_file_atomically(options.csv_path, format_csv(rows));
  if (!options.plot_path.empty()) write_file_atomically(options.plot_path, format_svg_plot(raw_rows, title));
  if (options.json_path == "-") {
    std::cout << format_report_json(rows, header);
  } else if (!options.no_table) {
    std::cout << format_report_header(header) << format_table(rows);
  }
  std::cout.flush();
  // Say so when traces were cut short (smoke mode / --max-events): the figures cover a prefix.
  std::vector<std::string> capped;
  for (const result_row& row : raw_rows) {
    if (row.notes.find("capped at") != std::string::npos &&
        (capped.empty() || capped.back() != row.trace)) {
      capped.push_back(row.trace);
    }
  }
  if (!capped.empty()) {
    std::cerr << "fragless-bench: " << capped.size() << " trace(s) replayed only up to " << options.max_events
              << " events" << (options.smoke ? " (smoke mode)" : "") << ": " << capped.front()
              << (capped.size() > 1 ? ", ..." : "") << " (see the notes field)\n";
  }
  if (options.smoke) std::cerr << "fragless-bench: smoke mode: 1 repetition per replay, host times are indicative only\n";
}

int finish(const std::vector<result_row>& rows) {
  if (any_failure(rows)) {
    std::cerr << "fragless-bench: some replays failed or found overlapping blocks (see the status column)\n";
    return 1;
  }
  return 0;
}

std::vector<bench_input> builtin_inputs(const std::vector<std::string>& specs) {
  std::vector<bench_input> inputs;
  if (specs.empty()) {
    for (const workload_spec& spec : default_workloads()) {
      inputs.push_back({"builtin:" + format_workload_spec(spec), spec.kind});
    }
  }
  for (const std::string& text : specs) {
    const workload_spec spec = parse_workload_spec(text);
    inputs.push_back({"builtin:" + format_workload_spec(spec), format_workload_spec(spec)});
  }
  return inputs;
}

int run_command(const bench_options& parsed, int argc, char** argv) {
  if (parsed.command == "device-info") return device_info_main();
  bench_options options = parsed;
  if (!options.call_log_dir.empty()) {  // Note [Call log]
    std::error_code error;
    std::filesystem::create_directories(options.call_log_dir, error);
    if (error) {
      std::cerr << "fragless-bench: cannot create call-log directory " << options.call_log_dir << ": " << error.message()
                << "\n";
      return 2;
    }
  }
  // Note [Counting device calls]: decided once, before any replay (refusals stop the run here).
  if (options.command == "main" || options.command == "replay" || options.command == "builtin" ||
      options.command == "corpus") {
    options.device = prepare_device(options);
  }
  if (options.command == "replay-one") {
    child_request request;
    request.source = options.source;
    request.allocator = options.allocator;
    request.configuration = options.configuration;
    request.repetitions = options.repetitions;
    request.max_events = options.max_events;
    request.capacity_bytes = options.capacity_bytes.value_or(0);
    request.device_call_ns = options.device_call_ns;
    request.host_work_ns = options.host_work_ns;
    request.timeout_seconds = options.timeout_seconds;
    request.call_log_path = options.call_log_path;
    return replay_one_main(request);
  }
  if (options.command == "micro") {
#if FRAGLESS_BENCH_HAVE_MICRO
    return fragless::bench::run_micro(argc - 1, argv + 1);
#else
    (void)argc;
    (void)argv;
    std::cerr << "fragless-bench: micro benchmarks are not built\n";
    return 2;
#endif
  }
  if (options.command == "generate") return run_generate(options);
  if (options.command == "layout") return run_layout(options);
  if (options.command == "corpus") {
    std::string command_line = "fragless-bench";
    for (int i = 1; i < argc; ++i) command_line += std::string(" ") + argv[i];
    return run_corpus(options, command_line);
  }
  if (options.command == "calibrate") {
    if (options.output_path.empty()) throw std::invalid_argument("calibrate needs -o OUT");
    const bool simulated = device_counters::simcuda_control_loaded();
    calibration measured = calibrate_device_calls(std::max(3, options.repetitions * 3 + 2));
    if (!measured.error.empty()) throw std::runtime_error("calibrate: " + measured.error);
    measured.table.device = simulated ? "simcuda (host-memory emulation, not a GPU: these are simcuda's figures)"
                                      : measured.device;
    std::string header =
        std::string("Measured by `fragless-bench calibrate`: median host ns per call, per size.\n") +
        (simulated ? "WARNING: measured on simcuda, not on a GPU. Do not use these prices for estimates.\n" : "");
    write_file_atomically(options.output_path, format_cost_table(measured.table, header));
    std::cerr << "fragless-bench: wrote " << options.output_path << " (" << measured.table.device << ")\n";
    return 0;
  }
  if (options.command == "convert") {
    if (options.positional.size() != 1 || options.output_path.empty()) {
      throw std::invalid_argument("convert needs one input and -o OUT");
    }
    const std::string& input = options.positional[0];
    // A built-in workload converts too ("builtin:SPEC"), e.g. to replay it elsewhere.
    const traces::trace t =
        input.rfind("builtin:", 0) == 0 ? load_source(input) : traces::load_trace_file(input, input);
    write_file_atomically(options.output_path, traces::write_text_trace(t));
    std::cerr << "fragless-bench: wrote " << options.output_path << " (" << t.events.size() << " events, "
              << t.seeded_block_count << " seeded blocks)\n";
    return 0;
  }
  if (options.command == "replay") {
    // Without files: every shared trace (what CI's smoke run uses).
    std::vector<bench_input> inputs;
    for (const std::string& path : options.positional) inputs.push_back({"file:" + path, path});
    if (inputs.empty()) {
      const std::string traces_dir = options.traces_dir.empty() ? default_traces_dir() : options.traces_dir;
      if (!std::filesystem::is_directory(traces_dir)) {
        throw std::invalid_argument("replay needs trace files, or a shared traces directory (none at " + traces_dir + ")");
      }
      for (const std::string& path : list_trace_files(traces_dir)) {
        inputs.push_back({"file:" + path, display_name(path, traces_dir)});
      }
    }
    const auto rows = run_matrix(inputs, options);
    emit(rows, options, "fragless-bench: reserved and live bytes");
    return finish(rows);
  }
  if (options.command == "builtin") {
    const auto rows = run_matrix(builtin_inputs(options.positional), options);
    emit(rows, options, "fragless-bench: built-in workloads");
    return finish(rows);
  }
  // main: built-in workloads and every shared trace, outputs in one directory.
  bench_options main_options = options;
  // The main job also answers "how big a batch fits on a 24 GiB card" (on a GPU: on this
  // device; Note [Capacity on a real GPU]); skipped in smoke mode.
  if (!options.smoke) main_options.max_fit = true;
  const std::string traces_dir = options.traces_dir.empty() ? default_traces_dir() : options.traces_dir;
  std::vector<bench_input> inputs = builtin_inputs(options.positional);
  if (std::filesystem::is_directory(traces_dir)) {
    for (const std::string& path : list_trace_files(traces_dir)) inputs.push_back({"file:" + path, display_name(path, traces_dir)});
  } else {
    std::cerr << "fragless-bench: no shared traces at " << traces_dir << " (built-in workloads only)\n";
  }
  const std::string out_dir = options.out_dir.empty() ? std::string(FRAGLESS_SOURCE_DIR) + "/build/bench-report" : options.out_dir;
  std::filesystem::create_directories(out_dir);
  if (main_options.json_path.empty()) main_options.json_path = out_dir + "/results.json";
  if (main_options.csv_path.empty()) main_options.csv_path = out_dir + "/results.csv";
  if (main_options.plot_path.empty()) main_options.plot_path = out_dir + "/reserved_over_time.svg";
  const auto rows = run_matrix(inputs, main_options);
  emit(rows, main_options, "fragless-bench: reserved vs live bytes, per workload");
  write_file_atomically(out_dir + "/table.txt", format_report_header(header_of(main_options)) + format_table(with_summary_rows(rows)));
  std::cerr << "fragless-bench: report written to " << out_dir << "\n";
  return finish(rows);
}

}  // namespace

}  // namespace fragless::bench

int main(int argc, char** argv) {
  using namespace fragless::bench;
  bench_options options;
  try {
    options = parse_bench_options(argc, argv);
  } catch (const std::invalid_argument& e) {
    if (std::string(e.what()) == "help") {
      std::cout << usage_text();
      return 0;
    }
    std::cerr << "fragless-bench: " << e.what() << "\n\n" << usage_text();
    return 2;
  }
  try {
    return run_command(options, argc, argv);
  } catch (const fragless::traces::pickle_error& e) {
    std::cerr << "fragless-bench: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "fragless-bench: " << e.what() << "\n";
    return 1;
  }
}
