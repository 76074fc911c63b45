// run_matrix: see header.
#include "run_matrix.hpp"

#include "child_runner.hpp"
#include "replay/ideal.hpp"
#include "replay/ideal_packer.hpp"
#include "replay/replay_allocator.hpp"
#include "report/progress_bar.hpp"
#include "trace_sources.hpp"
#include "workloads/workload.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <iostream>

namespace fragless::bench {

namespace {

struct input_facts {
  ideal_summary ideal;
  std::size_t events = 0;
  bool capped = false;
  std::vector<timeline_point> recorded;  // native as recorded, when present
  std::uint64_t recorded_peak_bytes = 0;
  std::uint64_t recorded_calls = 0;
  std::string notes;
  result_row packer;
  std::uint64_t recorded_wall_ns = 0;
};

input_facts facts_of(const traces::trace& t, std::size_t max_events) {
  input_facts facts;
  facts.events = max_events == 0 ? t.events.size() : std::min(max_events, t.events.size());
  facts.capped = facts.events < t.events.size();
  if (!facts.capped) facts.recorded_wall_ns = t.recorded_wall_ns;
  facts.ideal = compute_ideal(t, facts.events);
  for (const std::string& note : t.notes) facts.notes += (facts.notes.empty() ? "" : "; ") + note;
  if (facts.capped) {
    facts.notes += (facts.notes.empty() ? "" : "; ") + std::string("capped at ") + std::to_string(facts.events) +
                   " of " + std::to_string(t.events.size()) + " events";
  }
  if (!t.recorded_reserved.empty()) {
    // Live bytes at each recorded point, for the plot.
    std::vector<std::uint64_t> live_after(facts.events, 0);
    std::uint64_t live = 0;
    for (std::size_t i = 0; i < facts.events; ++i) {
      const auto& e = t.events[i];
      live = e.op == traces::trace_op::alloc ? live + e.size_bytes : live - e.size_bytes;
      live_after[i] = live;
    }
    for (const traces::recorded_point& p : t.recorded_reserved) {
      if (p.after_event >= facts.events && facts.events != 0) break;
      const std::uint64_t live_here = facts.events == 0 ? 0 : live_after[p.after_event];
      facts.recorded.push_back(timeline_point{p.after_event, live_here, p.bytes});
      facts.recorded_peak_bytes = std::max(facts.recorded_peak_bytes, p.bytes);
    }
    if (!facts.recorded.empty() && facts.events > 0) {
      facts.recorded.push_back(timeline_point{facts.events - 1, live_after[facts.events - 1], facts.recorded.back().reserved_bytes});
    }
    facts.recorded_calls = t.recorded_segment_allocs + t.recorded_segment_frees;
  }
  return facts;
}

void fill_from_outcome(result_row& row, const child_result& child, std::uint64_t ideal_bytes, const cost_table& prices) {
  const replay_outcome& o = child.outcome;
  row.status = o.status;
  if (o.status == "unavailable") {
    row.status = "unavailable: " + child.unavailable_reason;
    return;
  }
  if (o.status != "ok") return;
  if (o.ooms != 0) {
    row.status = "oom";
    row.notes += (row.notes.empty() ? "" : "; ") + std::string("first failed allocation at ") + o.first_failure;
  }
  row.peak_reserved_bytes = static_cast<double>(o.peak_reserved_bytes);
  row.ratio_to_ideal = ideal_bytes == 0 ? 0.0 : static_cast<double>(o.peak_reserved_bytes) / static_cast<double>(ideal_bytes);
  row.reserved_minus_allocated_at_peak_bytes = static_cast<double>(o.reserved_minus_allocated_at_peak_bytes);
  row.peak_live_bytes = static_cast<double>(o.peak_live_bytes);
  row.host_ns_per_op = o.host_ns_per_op;
  row.longest_op_ns = static_cast<double>(o.longest_op_ns);
  if (o.emulation_ns_per_op >= 0) row.emulation_ns_per_op = o.emulation_ns_per_op;
  row.ooms = static_cast<double>(o.ooms);
  row.events = static_cast<double>(o.events_replayed);
  if (o.counters_available) {
    row.device_calls = static_cast<double>(o.calls.total());
    row.device_allocs = static_cast<double>(o.calls.allocs);
    row.device_frees = static_cast<double>(o.calls.frees);
    row.device_maps = static_cast<double>(o.calls.maps);
    row.device_unmaps = static_cast<double>(o.calls.unmaps);
    row.syncs = static_cast<double>(o.calls.syncs);
    if (o.steady_calls >= 0) row.steady_calls = static_cast<double>(o.steady_calls);
    if (o.last_calling_pass >= 0) row.last_calling_pass = static_cast<double>(o.last_calling_pass);
    row.device_used_peak_bytes = static_cast<double>(o.device_used_peak_bytes);
    row.estimated_first_pass_ns = estimated_allocator_ns(o.first_pass, prices);
    if (o.steady_calls >= 0) row.estimated_steady_pass_ns = estimated_allocator_ns(o.steady_pass, prices);
  }
  row.timeline = o.timeline;
  row.host_ns_by_pass = pass_list(o.host_ns_by_pass, 1);
  if (o.counters_available) row.calls_by_pass = pass_list({o.calls_by_pass.begin(), o.calls_by_pass.end()}, 0);
}

// Note [Call log]: DIR/<workload>.<allocator>.csv, each name kept to letters, digits, '.',
// '_' and '-' (a file input by its base name; "corpus:moe-routing:7" -> "corpus_moe-routing_7").
std::string call_log_path(const std::string& directory, const bench_input& input, const std::string& allocator) {
  auto file_name_part = [](std::string text) {
    for (char& c : text) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '_';
    }
    return text;
  };
  std::string workload = input.source;
  if (workload.rfind("file:", 0) == 0) workload = std::filesystem::path(workload.substr(5)).filename().string();
  return (std::filesystem::path(directory) / (file_name_part(workload) + "." + file_name_part(allocator) + ".csv"))
      .string();
}

child_request request_for(const bench_input& input, const std::string& allocator, const std::string& configuration,
                          const bench_options& options) {
  child_request request;
  request.source = input.source;
  request.allocator = allocator;
  request.configuration = configuration;
  request.repetitions = options.repetitions;
  request.max_events = options.max_events;
  // Note [Capacity on a real GPU]: a GPU's own capacity is never set (prepare_device refused
  // any other), nor are call prices.
  request.capacity_bytes = options.device.simulated ? options.capacity_bytes.value_or(0) : 0;
  request.device_call_ns = options.device.simulated ? options.device_call_ns : 0;
  request.host_work_ns = options.host_work_ns;
  request.counting_library = options.device.counting_library;
  request.timeout_seconds = options.timeout_seconds;
  request.pass_stderr = options.verbose;
  if (!options.call_log_dir.empty()) request.call_log_path = call_log_path(options.call_log_dir, input, allocator);
  return request;
}

// Largest batch of a built-in workload that replays without OOM at the capacity
// (Note [Capacity on a real GPU]):
// doubling from the spec's batch, then bisection. Returns 0 when even batch 1 fails.
std::uint64_t max_fitting_batch(const workload_spec& base, const std::string& allocator, const std::string& configuration,
                                const bench_options& options) {
  auto fits = [&](std::uint64_t batch) {
    workload_spec spec = base;
    spec.batch = batch;
    bench_input input{"builtin:" + format_workload_spec(spec), ""};
    child_request request = request_for(input, allocator, configuration, options);
    request.repetitions = 1;
    request.max_events = 0;
    request.capacity_bytes = fit_capacity_to_set(options);
    const child_result result = run_child(request);
    return result.outcome.status == "ok" && result.outcome.ooms == 0;
  };
  std::uint64_t low = 0, high = 0;  // low fits (0 = nothing known), high does not (0 = unknown)
  std::uint64_t probe = std::max<std::uint64_t>(1, base.batch);
  while (high == 0) {
    if (fits(probe)) {
      low = probe;
      if (probe >= 4096) return probe;
      probe *= 2;
    } else {
      high = probe;
    }
  }
  if (low == 0) {
    low = 0;
    // Search below the spec's batch.
    while (high - low > 1) {
      const std::uint64_t middle = low + (high - low) / 2;
      if (fits(middle)) low = middle;
      else high = middle;
    }
    return low;
  }
  while (high - low > 1) {
    const std::uint64_t middle = low + (high - low) / 2;
    if (fits(middle)) low = middle;
    else high = middle;
  }
  return low;
}

}  // namespace

cost_table selected_cost_table(const bench_options& options) {
  if (options.cost_table_path.empty()) return default_cost_table();
  std::vector<std::string> warnings;
  cost_table table = load_cost_table(options.cost_table_path, warnings);
  for (const std::string& warning : warnings) std::cerr << "fragless-bench: warning: " << warning << "\n";
  return table;
}

result_row replay_row(const bench_input& input, const std::string& allocator, const std::string& configuration,
                      const bench_options& options, std::uint64_t ideal_bytes, const cost_table& prices) {
  result_row row;
  row.trace = input.display;
  row.allocator = allocator;
  row.ideal_bytes = static_cast<double>(ideal_bytes);
  if (!peer_is_built(allocator)) {
    row.status = "not built";
    return row;
  }
  // Note [Cost model] prices the device calls that simcuda made free. On a real GPU the timed
  // calls already paid their real price: pricing them again would count them twice, so the
  // estimate there is the measured time alone (an empty table prices every call at 0).
  const cost_table no_prices;
  fill_from_outcome(row, run_child(request_for(input, allocator, configuration, options)), ideal_bytes,
                    options.device.simulated ? prices : no_prices);
  return row;
}

result_row packer_row(const std::string& display, const traces::trace& t, std::size_t event_limit,
                      std::uint64_t ideal_bytes) {
  const packer_summary packed = run_ideal_packer(t, event_limit);
  result_row row;
  row.trace = display;
  row.allocator = packer_row_name;
  row.ideal_bytes = static_cast<double>(ideal_bytes);
  row.peak_reserved_bytes = static_cast<double>(packed.peak_mapped_bytes);
  row.ratio_to_ideal = ideal_bytes == 0 ? 0.0 : static_cast<double>(packed.peak_mapped_bytes) / static_cast<double>(ideal_bytes);
  row.device_maps = static_cast<double>(packed.page_maps);
  row.device_unmaps = static_cast<double>(packed.page_unmaps);
  row.device_calls = static_cast<double>(packed.page_maps + packed.page_unmaps);
  row.notes = "reference, not a replay: best fit in one unbounded range, a 2 MiB page mapped while a block touches it";
  return row;
}

std::vector<std::pair<std::string, std::string>> requested_allocators(const bench_options& options) {
  std::vector<std::pair<std::string, std::string>> allocators;
  const std::vector<std::string> names = options.allocators.empty() ? default_peer_names() : options.allocators;
  for (const std::string& name : names) allocators.emplace_back(name, "");
  for (const auto& [name, spec] : options.named_configurations) allocators.emplace_back("fragless[" + name + "]", spec);
  if (const char* env = std::getenv("FRAGLESS_CONF"); env != nullptr && *env != '\0' && options.allocators.empty()) {
    allocators.emplace_back("fragless[env]", env);
  }
  return allocators;
}

bool any_failure(const std::vector<result_row>& rows) {
  for (const result_row& row : rows) {
    if (row.status.rfind("failed", 0) == 0 || row.status.rfind("overlap", 0) == 0) return true;
  }
  return false;
}

std::vector<result_row> run_matrix(const std::vector<bench_input>& inputs, const bench_options& options) {
  // Load and validate everything first: a bad input stops the run before anything is written.
  std::vector<input_facts> facts;
  facts.reserve(inputs.size());
  for (const bench_input& input : inputs) {
    const traces::trace t = load_source(input.source);
    facts.push_back(facts_of(t, options.max_events));
    facts.back().packer = packer_row(input.display, t, options.max_events, facts.back().ideal.ideal_bytes);
  }
  const cost_table prices = selected_cost_table(options);

  const auto allocators = requested_allocators(options);
  const bool fit = options.max_fit;
  std::size_t total = inputs.size() * allocators.size();
  progress_bar progress(total, options.progress || progress_bar::stderr_is_terminal());
  std::vector<result_row> rows;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const bench_input& input = inputs[i];
    const input_facts& f = facts[i];
    for (const auto& [allocator, configuration] : allocators) {
      progress.advance(input.display + " / " + allocator);
      result_row row = replay_row(input, allocator, configuration, options, f.ideal.ideal_bytes, prices);
      if (row.estimated_steady_pass_ns && f.recorded_wall_ns != 0) {
        row.estimated_steady_fraction_of_wall = *row.estimated_steady_pass_ns / static_cast<double>(f.recorded_wall_ns);
      }
      row.notes = f.notes + (f.notes.empty() || row.notes.empty() ? "" : "; ") + row.notes;
      if (row.status == "not built") {
        rows.push_back(std::move(row));
        continue;
      }
      if (fit && input.source.rfind("builtin:", 0) == 0 && row.ok()) {
        const workload_spec spec = parse_workload_spec(input.source.substr(8));
        row.max_fitting_batch = static_cast<double>(max_fitting_batch(spec, allocator, configuration, options));
      }
      rows.push_back(std::move(row));
    }
    rows.push_back(f.packer);
    if (!f.recorded.empty()) {
      result_row row;
      row.trace = input.display;
      row.allocator = "pytorch-recorded";
      row.ideal_bytes = static_cast<double>(f.ideal.ideal_bytes);
      row.peak_reserved_bytes = static_cast<double>(f.recorded_peak_bytes);
      row.ratio_to_ideal = f.ideal.ideal_bytes == 0 ? 0.0
                                                    : static_cast<double>(f.recorded_peak_bytes) / static_cast<double>(f.ideal.ideal_bytes);
      row.device_calls = static_cast<double>(f.recorded_calls);
      row.peak_live_bytes = static_cast<double>(f.ideal.peak_live_bytes);
      row.events = static_cast<double>(f.events);
      row.notes = "rebuilt from the trace's segment events (not a replay)";
      row.timeline = f.recorded;
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

}  // namespace fragless::bench
