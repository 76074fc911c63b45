// bench_options: argument parsing and the usage text (see header).
#include "bench_options.hpp"

#include <algorithm>
#include <stdexcept>

#include "fragless/options.hpp"
#include "replay/replay_allocator.hpp"

namespace fragless::bench {

namespace {

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::uint64_t parse_count(const std::string& option, const std::string& text, std::uint64_t max) {
  if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos) {
    throw std::invalid_argument(option + " needs a non-negative integer, got '" + text + "'");
  }
  const std::uint64_t value = std::stoull(text);
  if (value > max) throw std::invalid_argument(option + " value " + text + " is too large");
  return value;
}

// --allocators names only allocators the benchmark knows (a typo must not run and report
// a row of its own).
void check_allocator_names(const std::vector<std::string>& names) {
  const std::vector<std::string> known = default_peer_names();
  for (const std::string& name : names) {
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    std::string list;
    for (const std::string& one : known) list += (list.empty() ? "" : ", ") + one;
    throw std::invalid_argument("--allocators: unknown allocator '" + name + "' (known: " + list + ")");
  }
}

// --conf NAME=SPEC: SPEC must parse without a warning, or the replay would silently run
// with defaults where the user asked for something else.
void check_configuration(const std::string& name, const std::string& spec) {
  std::string first_warning;
  fragless::parse_options(spec, [&](std::string_view message) {
    if (first_warning.empty()) first_warning = std::string(message);
  });
  if (!first_warning.empty()) throw std::invalid_argument("--conf " + name + "=" + spec + ": " + first_warning);
}

}  // namespace

std::uint64_t parse_size(const std::string& text) {
  std::uint64_t bytes = 0;
  std::string error;
  if (!parse_size_bytes(text, false, bytes, error))
    throw std::invalid_argument("size '" + text + "': " + error);
  if (bytes == 0) throw std::invalid_argument("size '" + text + "' is out of range");
  return bytes;
}

std::string usage_text() {
  return R"(fragless-bench: how much GPU memory does each allocator reserve on a workload, and how
much host time does it cost? Each (trace, allocator) replays in its own child process, on
simcuda when it is loaded (scripts/with-simcuda), else on the real GPU, where an
LD_PRELOADed counter (libfragless_bench_counting.so) counts the device calls.

usage:
  fragless-bench main [options]              built-in workloads + every shared trace; writes
                                             table, JSON, CSV and plot to --out (default
                                             build/bench-report)
  fragless-bench replay FILE... [options]    replay PyTorch snapshots (.pickle), RMM logs,
                                             id,lower,upper,size CSVs or fragless-trace files
  fragless-bench builtin [SPEC...] [options] built-in workloads; SPEC = kind[:key=value,...],
                                             kinds transformer-training, kv-cache-inference,
                                             cnn-training; keys model, layers, batch, steps,
                                             sequence, seed
  fragless-bench convert IN -o OUT           convert any input (a file, or builtin:SPEC) to the
                                             fragless-trace text format
  fragless-bench micro [args]                micro benchmarks (when built)
  fragless-bench generate FAMILY --seed N -o OUT
                                             write one generated corpus workload as a
                                             fragless-trace file
  fragless-bench corpus --seeds N [options]  replay N seeds of every corpus family through
                                             every allocator and the idealized packer;
                                             per-family and overall tables (markdown with
                                             --markdown, rows with --json)
  fragless-bench layout [FILE...] [options]  the loop plans' layout stage alone: each corpus
                                             seed's pass (--seeds, --families) or each trace
                                             file laid out as one step, checked; its span over
                                             the step's peak and its time, per family
                                             (markdown with --markdown, rows with --csv; --out
                                             DIR writes each step for an offline solver)
  fragless-bench calibrate -o OUT            measure the host cost of each device call on
                                             this device (several sizes, medians) and write
                                             a cost table (--cost-table reads it)

options:
  --allocators LIST      comma list of fragless, pytorch, pytorch-expandable, cudamalloc
                         (default: all; "pytorch-recorded" rows come from snapshots themselves)
  --conf NAME=SPEC       also replay fragless with configuration SPEC (as FRAGLESS_CONF),
                         shown as fragless[NAME]; repeatable. FRAGLESS_CONF in the environment
                         adds fragless[env].
  --repetitions N        replays per (trace, allocator); host time is the median (default 3)
  --smoke                quick CI mode: 1 repetition, at most 20000 events per trace
  --max-events N         replay only the first N events of each trace (reported in notes)
  --capacity SIZE        device capacity, e.g. 24GiB (simcuda only: simcuda_set_capacity; units
                         as in FRAGLESS_CONF: KiB/MiB/GiB binary, KB/MB/GB decimal); OOMs are
                         counted. On a real GPU the capacity is the device's memory and any
                         other value is refused
  --max-fit              built-in workloads: binary-search the largest batch that fits in
                         --capacity (default 24GiB on simcuda, the device's memory on a GPU)
  --device-call-ns N     charge N ns of host time per priced device call (memory calls and
                         event record/wait/query; off; simcuda only)
  --host-work-ns N       spin N ns of host time before each replayed event, outside the timed
                         calls, as a program works between its allocator calls (off); shows
                         what the allocator does beside it in the longest call
  --json PATH            write the rows as JSON ("-" = stdout)
  --csv PATH             write the rows as CSV
  --plot PATH            write an SVG plot of reserved and live bytes over each trace
  --traces DIR           shared traces directory (main; default <repo>/../shared/traces)
  --out DIR              output directory of main (default build/bench-report)
  --progress             progress bar on stderr even when it is not a terminal
  --timeout SECONDS      per child replay (default 600)
  --no-table             do not print the table on stdout
  --cost-table FILE      device-call prices for the estimated allocator time (default: the
                         compiled-in bench/cost/device_call_costs.txt)
  --seeds N              corpus: seeds per family (default 20)
  --first-seed N         corpus: first seed (default 1)
  --families LIST        corpus: comma list of families (default: all)
  --seed N               generate: the seed (default 1)
  --jobs N               corpus: replays at once (default 2)
  --markdown PATH        corpus: write the per-family tables as markdown
  --layout-threads       layout: lay each step out as the allocating thread lays out a large
                         whole-pass step, its orders and its two directions on threads of their
                         own (Note [Directions at once]); its ms are then the caller's wall
                         time, the wait, not one thread's CPU time
  --verbose              show the replay processes' stderr (allocator and simcuda messages);
                         otherwise only a failed replay's last stderr line, in its status
  --call-log DIR         write each replay's device calls event by event to
                         DIR/<workload>.<allocator>.csv: pass, event, op, size, stream,
                         reserved and live bytes, calls by kind (Note [Call log])

environment:
  FRAGLESS_BENCH_COUNTING  auto (default): simcuda's counters when simcuda is loaded, else the
                         counting library; interposer: drive simcuda as a real GPU (the
                         counting library, no simcuda control API); simcuda: require simcuda
  FRAGLESS_BENCH_DEVICE  the report's device line (scripts/dev.sh main sets it); detected
                         when unset
  FRAGLESS_BENCH_COUNTING_LIBRARY  path of libfragless_bench_counting.so (default: beside
                         fragless-bench, or the install's library directory)
)";
}

bench_options parse_bench_options(int argc, char** argv) {
  bench_options options;
  if (argc < 2) throw std::invalid_argument("missing command");
  options.command = argv[1];
  if (options.command == "--help" || options.command == "-h" || options.command == "help")
    throw std::invalid_argument("help");
  static const std::vector<std::string> commands = {"main", "replay", "builtin", "convert", "replay-one", "micro",
                                                    "generate", "corpus", "layout", "calibrate", "device-info"};
  bool known = false;
  for (const std::string& c : commands) known = known || c == options.command;
  if (!known) throw std::invalid_argument("unknown command '" + options.command + "'");
  if (options.command == "micro") {  // the micro benchmarks parse their own arguments
    for (int i = 2; i < argc; ++i) options.positional.emplace_back(argv[i]);
    return options;
  }
  for (int i = 2; i < argc; ++i) {
    const std::string argument = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(argument + " needs a value");
      return argv[++i];
    };
    if (argument == "--allocators") options.allocators = split_commas(value());
    else if (argument == "--conf") {
      const std::string spec = value();
      const std::size_t equals = spec.find('=');
      if (equals == std::string::npos || equals == 0) throw std::invalid_argument("--conf needs NAME=SPEC");
      check_configuration(spec.substr(0, equals), spec.substr(equals + 1));
      options.named_configurations.emplace_back(spec.substr(0, equals), spec.substr(equals + 1));
    }
    else if (argument == "--repetitions") options.repetitions = static_cast<int>(parse_count(argument, value(), 1000));
    else if (argument == "--smoke") options.smoke = true;
    else if (argument == "--max-events") options.max_events = parse_count(argument, value(), UINT32_MAX);
    else if (argument == "--capacity") options.capacity_bytes = parse_size(value());
    else if (argument == "--max-fit") options.max_fit = true;
    else if (argument == "--device-call-ns") options.device_call_ns = parse_count(argument, value(), 10'000'000'000ULL);
    else if (argument == "--host-work-ns") options.host_work_ns = parse_count(argument, value(), 1'000'000'000ULL);
    else if (argument == "--json") options.json_path = value();
    else if (argument == "--csv") options.csv_path = value();
    else if (argument == "--plot") options.plot_path = value();
    else if (argument == "-o" || argument == "--output") options.output_path = value();
    else if (argument == "--out") options.out_dir = value();
    else if (argument == "--traces") options.traces_dir = value();
    else if (argument == "--progress") options.progress = true;
    else if (argument == "--no-table") options.no_table = true;
    else if (argument == "--verbose") options.verbose = true;
    else if (argument == "--timeout") options.timeout_seconds = static_cast<int>(parse_count(argument, value(), 86400));
    else if (argument == "--cost-table") options.cost_table_path = value();
    else if (argument == "--seeds") options.seeds = parse_count(argument, value(), 1'000'000);
    else if (argument == "--first-seed") options.first_seed = parse_count(argument, value(), UINT32_MAX);
    else if (argument == "--seed") options.seed = parse_count(argument, value(), UINT32_MAX);
    else if (argument == "--families") options.families = split_commas(value());
    else if (argument == "--jobs") options.jobs = static_cast<int>(parse_count(argument, value(), 64));
    else if (argument == "--markdown") options.markdown_path = value();
    else if (argument == "--layout-threads") options.layout_threads = true;
    else if (argument == "--call-log") options.call_log_dir = value();
    else if (argument == "--call-log-file") options.call_log_path = value();
    else if (argument == "--source") options.source = value();
    else if (argument == "--allocator") options.allocator = value();
    else if (argument == "--configuration") options.configuration = value();
    else if (argument == "--help" || argument == "-h") throw std::invalid_argument("help");
    else if (argument.size() > 1 && argument[0] == '-' && options.command != "micro") {
      throw std::invalid_argument("unknown option '" + argument + "'");
    } else {
      options.positional.push_back(argument);
    }
  }
  if (options.repetitions < 1) throw std::invalid_argument("--repetitions must be at least 1");
  if (options.jobs < 1) throw std::invalid_argument("--jobs must be at least 1");
  check_allocator_names(options.allocators);
  if (options.smoke) {
    options.repetitions = 1;
    if (options.max_events == 0) options.max_events = 20000;
  }
  return options;
}

}  // namespace fragless::bench
