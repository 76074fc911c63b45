// corpus_command: see header.
#include "corpus_command.hpp"

#include "replay/ideal.hpp"
#include "report/corpus_report.hpp"
#include "report/outputs.hpp"
#include "report/progress_bar.hpp"
#include "parallel_tasks.hpp"
#include "run_matrix.hpp"
#include "traces/text_trace.hpp"
#include "workloads/corpus.hpp"

#include <iostream>
#include <mutex>
#include <stdexcept>

namespace fragless::bench {

namespace {

constexpr std::uint64_t default_seeds = 20;

struct corpus_task {
  std::string family;
  std::uint64_t seed;
};

}  // namespace

int run_generate(const bench_options& options) {
  if (options.positional.size() != 1 || options.output_path.empty()) {
    throw std::invalid_argument("generate needs one FAMILY and -o OUT");
  }
  const traces::trace t = generate_corpus_workload(options.positional[0], options.seed);
  write_file_atomically(options.output_path, traces::write_text_trace(t));
  std::cerr << "fragless-bench: wrote " << options.output_path << " (" << t.name << ", " << t.events.size()
            << " events)\n";
  return 0;
}

int run_corpus(const bench_options& options, const std::string& command_line) {
  std::vector<std::string> families = options.families.empty() ? corpus_families() : options.families;
  for (const std::string& family : families) generate_corpus_workload(family, 0);  // validates the name
  const std::uint64_t seeds = options.seeds == 0 ? default_seeds : options.seeds;
  std::vector<corpus_task> tasks;
  for (std::uint64_t s = 0; s < seeds; ++s) {
    for (const std::string& family : families) tasks.push_back({family, options.first_seed + s});
  }
  const auto allocators = requested_allocators(options);
  const cost_table prices = selected_cost_table(options);
  progress_bar progress(tasks.size() * (allocators.size() + 1), options.progress || progress_bar::stderr_is_terminal());
  std::mutex mutex;  // guards progress and results
  std::vector<std::vector<corpus_row>> results(tasks.size());
  run_in_parallel(tasks.size(), options.jobs, [&](std::size_t i) {
    const corpus_task& task = tasks[i];
    const std::string source = corpus_source(task.family, task.seed);
    std::vector<corpus_row> rows;
    const traces::trace t = generate_corpus_workload(task.family, task.seed);
    const std::uint64_t ideal_bytes = compute_ideal(t).ideal_bytes;
    rows.push_back({task.family, packer_row(source, t, 0, ideal_bytes)});
    {
      std::lock_guard<std::mutex> lock(mutex);
      progress.advance(source + " / " + packer_row_name);
    }
    for (const auto& [allocator, configuration] : allocators) {
      rows.push_back({task.family, replay_row({source, source}, allocator, configuration, options, ideal_bytes, prices)});
      std::lock_guard<std::mutex> lock(mutex);
      progress.advance(source + " / " + allocator);
    }
    std::lock_guard<std::mutex> lock(mutex);
    results[i] = std::move(rows);
  });

  std::vector<corpus_row> rows;
  std::vector<result_row> flat;
  for (auto& task_rows : results) {
    for (corpus_row& r : task_rows) {
      flat.push_back(r.row);
      rows.push_back(std::move(r));
    }
  }
  // What the figures were measured on (device_setup's lines), above the tables.
  std::string device_lines;
  if (!options.device.device_line.empty()) device_lines += "Device: " + options.device.device_line + "\n\n";
  if (!options.device.counting_line.empty()) device_lines += "Counting: " + options.device.counting_line + "\n\n";
  const std::string markdown = device_lines + format_corpus_markdown(rows, families, command_line);
  if (!options.markdown_path.empty()) write_file_atomically(options.markdown_path, markdown);
  if (!options.json_path.empty()) write_file_atomically(options.json_path, format_corpus_json(rows, families, command_line));
  if (!options.csv_path.empty()) write_file_atomically(options.csv_path, format_csv(flat));
  if (!options.no_table) std::cout << markdown;
  std::cout.flush();
  if (any_failure(flat)) {
    std::cerr << "fragless-bench: some corpus replays failed or found overlapping blocks (see --csv rows)\n";
    return 1;
  }
  return 0;
}

}  // namespace fragless::bench
