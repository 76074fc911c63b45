// layout_command: see header.
#include "layout_command.hpp"

#include "core/monotonic_clock.hpp"
#include "layout/step_instance.hpp"
#include "parallel_tasks.hpp"
#include "report/median.hpp"
#include "report/number_text.hpp"
#include "report/outputs.hpp"
#include "report/progress_bar.hpp"
#include "traces/text_trace.hpp"
#include "workloads/corpus.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <stdexcept>

namespace fragless::bench {

// Note [Layout bench]
// About half of the corpus seeds above 1.03x the ideal where the idealized packer reaches
// 1.01x end there after a loop plan's layout wider than its step's peak (121 of 232 in the
// README's run; docs/compaction.md, "Where the memory goal is missed"), and a layout of a
// whole pass is the longest allocator call there is. Replays measure both only through everything else a pass does.
// This command measures the layout stage alone: each seed's pass is one step (the loop a
// serving or many-stream program's plan lays out is most often its whole pass), laid out
// by libfragless's own lay_out_narrowest on one thread, checked, and reported as its span
// over the step's peak (no layout is narrower than the peak) and the time it took -- in
// seconds for the whole corpus, so that a change to the layout stage can be judged on
// every family before a replay. --out writes each step for an offline solver.
// --layout-threads lays it out as the allocating thread lays out a whole-pass step, with
// threads of its own, and times the caller's wall clock: the stall a program sees.

namespace {

struct layout_row {
  std::string family;  // the corpus family, or the file's path
  std::string source;
  std::size_t blocks = 0;
  std::size_t phases = 0;
  std::size_t peak_bytes = 0;
  std::size_t span_bytes = 0;
  double layout_ms = 0;  // this thread's CPU time
  double wall_ms = 0;    // the caller's wall time: its wait, where the layout has threads
  std::uint64_t offsets_digest = 0;  // FNV-1a over every block's offset: the layout itself
  bool valid = true;
  std::string conflict;
};

struct layout_task {
  std::string family;
  std::string source;  // a corpus source or a file path
  std::uint64_t seed = 0;
  bool corpus = false;
};

double thread_cpu_ms() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e3 + static_cast<double>(now.tv_nsec) / 1e6;
}

// Two runs laid a step out the same way if their digests agree (a change to the layout
// stage meant to be faster only is checked so: every offset, not only the span).
std::uint64_t offsets_digest(const std::vector<core::step_block>& blocks) {
  std::uint64_t digest = 0xcbf29ce484222325ull;
  for (const core::step_block& block : blocks)
    for (std::size_t byte = 0; byte < sizeof(block.offset_bytes); ++byte) {
      digest ^= (block.offset_bytes >> (8 * byte)) & 0xff;
      digest *= 0x100000001b3ull;
    }
  return digest;
}

layout_row lay_out_task(const layout_task& task, const std::string& out_dir, bool threads) {
  const traces::trace t = task.corpus ? generate_corpus_workload(task.family, task.seed)
                                      : traces::load_trace_file(task.source, task.source);
  step_instance instance = step_instance_of(t);
  if (!out_dir.empty()) {
    std::string stem = task.corpus ? task.family + "-" + std::to_string(task.seed)
                                   : std::filesystem::path(task.source).replace_extension().string();
    std::replace(stem.begin(), stem.end(), '/', '_');  // a file's path, flattened: names stay apart
    write_file_atomically(out_dir + "/" + stem + ".step", format_step_instance(instance));
  }
  layout_row row;
  row.family = task.family;
  row.source = task.source;
  row.blocks = instance.blocks.size();
  row.phases = instance.phases;
  row.peak_bytes = instance.peak_bytes;
  if (instance.blocks.empty()) return row;
  const double start_ms = thread_cpu_ms();
  const std::int64_t wall_start_ns = core::now_ns();
  const core::layout_threads threading = threads ? core::layout_threads::orders_and_backward : core::layout_threads::none;
  row.span_bytes = core::lay_out_narrowest(instance.blocks, instance.phases, nullptr, threading);
  row.layout_ms = thread_cpu_ms() - start_ms;
  row.wall_ms = static_cast<double>(core::now_ns() - wall_start_ns) / 1e6;
  row.valid = layout_is_valid(instance.blocks, &row.conflict);
  row.offsets_digest = offsets_digest(instance.blocks);
  return row;
}

double span_over_peak(const layout_row& row) {
  return row.peak_bytes == 0 ? 1.0 : static_cast<double>(row.span_bytes) / static_cast<double>(row.peak_bytes);
}

std::string hex_digest(std::uint64_t digest) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(digest));
  return text;
}

std::string format_csv(const std::vector<layout_row>& rows) {
  std::string out =
      "source,family,blocks,phases,peak_bytes,span_bytes,span_over_peak,layout_ms,valid,offsets_digest,wall_ms\n";
  for (const layout_row& row : rows)
    out += row.source + "," + row.family + "," + std::to_string(row.blocks) + "," + std::to_string(row.phases) + "," +
           std::to_string(row.peak_bytes) + "," + std::to_string(row.span_bytes) + "," + fixed(span_over_peak(row), 5) +
           "," + fixed(row.layout_ms, 3) + "," + (row.valid ? "1" : "0") + "," + hex_digest(row.offsets_digest) + "," +
           fixed(row.wall_ms, 3) + "\n";
  return out;
}

std::string format_markdown(const std::vector<layout_row>& rows, const std::vector<std::string>& groups, bool threads) {
  std::string out =
      std::string(threads ? "Each pass laid out as one step by the loop plans' layout stage (lay_out_narrowest, with "
                            "threads of its own); the span over the step's peak, and the caller's wall time:\n\n"
                          : "Each pass laid out as one step by the loop plans' layout stage (lay_out_narrowest, one "
                            "thread); the span over the step's peak, and the layout's CPU time:\n\n") +
      "| family | steps | blocks (median) | span / peak (geomean) | > 1.01x | > 1.03x | worst | ms (median) | ms "
      "(90th percentile) | ms (worst) |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  auto line = [&](const std::string& name, const std::vector<const layout_row*>& group) {
    std::vector<double> blocks, ms;
    double log_sum = 0, worst = 1.0;
    std::size_t above_1 = 0, above_3 = 0;
    for (const layout_row* row : group) {
      const double ratio = span_over_peak(*row);
      blocks.push_back(static_cast<double>(row->blocks));
      ms.push_back(threads ? row->wall_ms : row->layout_ms);
      log_sum += std::log(ratio);
      worst = std::max(worst, ratio);
      above_1 += ratio > 1.01;
      above_3 += ratio > 1.03;
    }
    if (group.empty()) return;
    out += "| " + name + " | " + std::to_string(group.size()) + " | " + fixed(median(blocks), 0) + " | " +
           fixed(std::exp(log_sum / static_cast<double>(group.size())), 4) + " | " + std::to_string(above_1) + " | " +
           std::to_string(above_3) + " | " + fixed(worst, 3) + " | " + fixed(median(ms), 1) + " | " +
           fixed(percentile(ms, 0.9), 1) + " | " + fixed(percentile(ms, 1.0), 1) + " |\n";
  };
  std::vector<const layout_row*> all;
  for (const std::string& group : groups) {
    std::vector<const layout_row*> members;
    for (const layout_row& row : rows)
      if (row.family == group && row.blocks != 0) members.push_back(&row);
    line(group, members);
    all.insert(all.end(), members.begin(), members.end());
  }
  if (groups.size() > 1) line("all", all);
  return out;
}

}  // namespace

int run_layout(const bench_options& options) {
  std::vector<layout_task> tasks;
  std::vector<std::string> groups;
  for (const std::string& path : options.positional) {  // each file a row of its own
    tasks.push_back({path, path, 0, false});
    groups.push_back(path);
  }
  if (tasks.empty()) {
    groups = options.families.empty() ? corpus_families() : options.families;
    for (const std::string& family : groups) generate_corpus_workload(family, 0);  // validates the name
    const std::uint64_t seeds = options.seeds == 0 ? 20 : options.seeds;
    for (std::uint64_t s = 0; s < seeds; ++s)
      for (const std::string& family : groups)
        tasks.push_back({family, corpus_source(family, options.first_seed + s), options.first_seed + s, true});
  }
  if (!options.out_dir.empty()) std::filesystem::create_directories(options.out_dir);
  progress_bar progress(tasks.size(), options.progress || progress_bar::stderr_is_terminal());
  std::vector<layout_row> rows(tasks.size());
  std::mutex mutex;  // guards progress and the first failure
  std::string failure;
  run_in_parallel(tasks.size(), options.jobs, [&](std::size_t i) {
    try {
      rows[i] = lay_out_task(tasks[i], options.out_dir, options.layout_threads);
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mutex);
      const std::string what = e.what();  // a reader's message names its file already
      if (failure.empty()) failure = what.rfind(tasks[i].source, 0) == 0 ? what : tasks[i].source + ": " + what;
    }
    std::lock_guard<std::mutex> lock(mutex);
    progress.advance(tasks[i].source);
  });
  if (!failure.empty()) throw std::runtime_error(failure);
  if (!options.csv_path.empty()) write_file_atomically(options.csv_path, format_csv(rows));
  const std::string markdown = format_markdown(rows, groups, options.layout_threads);
  if (!options.markdown_path.empty()) write_file_atomically(options.markdown_path, markdown);
  if (!options.no_table) std::cout << markdown;
  std::cout.flush();
  for (const layout_row& row : rows) {
    if (row.valid) continue;
    std::cerr << "fragless-bench: invalid layout of " << row.source << ": " << row.conflict << "\n";
    return 1;
  }
  return 0;
}

}  // namespace fragless::bench
