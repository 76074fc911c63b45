// `snapshot PID -o FILE`, `show FILE`, `map FILE -o OUT.svg`: take a snapshot from a live
// process through its stats page, and look at snapshot files (fragless JSON or PyTorch
// pickle).
#include <cstdio>

#include "commands.hpp"
#include "segment_map.hpp"
#include "snapshot_files.hpp"
#include "stats_page_reader.hpp"

namespace fragless::cli {
namespace {

constexpr const char* snapshot_help =
    "usage: fragless-stats snapshot PID -o FILE [--format json|pickle] [--timeout SECONDS]\n"
    "\n"
    "Asks process PID for a full memory snapshot (every segment and block) and writes it to\n"
    "FILE: fragless JSON (schema fragless.snapshot/1), or with --format pickle (default when\n"
    "FILE ends in .pickle or .pkl) a PyTorch snapshot pickle that PyTorch's memory_viz opens.\n"
    "The process answers from its allocator's slow path or request thread; --timeout (default\n"
    "5 seconds) bounds each wait. Every snapshot is checked (Note [Consistent snapshots]):\n"
    "one found inconsistent is taken again, up to 50 times, and the message says\n"
    "\"retried N times\".\n";

// Note [Consistent snapshots]
// A process takes its snapshot under its device lock, but small-pool allocations and frees
// run on other threads under their own shard locks, and a block is between its slab and
// the live-block map for a moment: read from the live map, a snapshot of a busy process
// missed blocks, which check_snapshot() reports as an inconsistency a user reads as
// corruption (4 of 5 snapshots of a four-thread process). So the process reads each slab
// from the slab itself, under its shard lock (device_cache::snapshot), and a new slab joins
// its shard before the device lock is dropped. A large block used to pass between the free
// index and the live map outside the device lock too; it now enters the map before the
// lock is dropped and leaves it only once its pool has it back (Note [Frees in flight] in
// the allocator's live_block_map.hpp), so a snapshot is whole however busy the process.
// fragless-stats still checks every snapshot it receives: one that fails check_snapshot()
// is asked for again (like a seqlock reader retrying a torn read), "retried N times" says
// when that was needed, and after kMaxSnapshotAttempts the last one is written with a
// warning naming the first problem.
constexpr int kMaxSnapshotAttempts = 50;

constexpr const char* show_help =
    "usage: fragless-stats show FILE [--cells N] [--no-color]\n"
    "\n"
    "Reads a snapshot file (fragless JSON, or a PyTorch torch.cuda.memory._dump_snapshot()\n"
    "pickle, read without running any code from it) and prints, per device, the summary\n"
    "table the snapshot implies (current values; peaks and totals are history a snapshot\n"
    "does not hold), any inconsistency found, and a text map of the segments (N cells each,\n"
    "default 64).\n";

constexpr const char* map_help =
    "usage: fragless-stats map FILE -o OUT.svg [--title TEXT]\n"
    "\n"
    "Draws every segment of a snapshot file as a bar (address order, widths to scale), its\n"
    "blocks coloured by state (allocated, pending free, free), with a legend and a title.\n";

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

int print_help(const char* text) {
  std::fputs(text, stdout);
  std::fputs(exit_codes_help.data(), stdout);
  return exit_ok;
}

}  // namespace

int run_snapshot(arguments& args) {
  if (args.has_help()) return print_help(snapshot_help);
  std::optional<long> pid;
  std::string output, format;
  double timeout_seconds = 5;
  while (!args.empty()) {
    if (args.take("-o") || args.take("--output")) {
      if (args.empty()) return fail(exit_usage, "snapshot: -o needs a FILE");
      output = std::string(args.next());
    } else if (args.take("--format")) {
      format = std::string(args.next());
      if (format != "json" && format != "pickle") return fail(exit_usage, "snapshot: --format is json or pickle");
    } else if (args.take("--timeout")) {
      const auto seconds = parse_seconds(args.next());
      if (!seconds) return fail(exit_usage, "snapshot: --timeout SECONDS must be a number from 0.01 to 86400");
      timeout_seconds = *seconds;
    } else if (!pid) {
      pid = parse_pid(args.next());
      if (!pid) return fail(exit_usage, "snapshot: PID must be a positive integer");
    } else {
      return fail(exit_usage, "snapshot: unknown argument \"" + std::string(args.next()) + "\"");
    }
  }
  if (!pid || output.empty()) return fail(exit_usage, "snapshot: usage: fragless-stats snapshot PID -o FILE");
  if (format.empty()) format = ends_with(output, ".pickle") || ends_with(output, ".pkl") ? "pickle" : "json";

  stats_reader::open_status status{};
  std::string error;
  auto page = stats_reader::page::open(static_cast<pid_t>(*pid), status, error);
  if (!page || status != stats_reader::open_status::ok) {
    if (status == stats_reader::open_status::missing)
      return fail(exit_no_process, "process " + std::to_string(*pid) + " does not publish fragless stats");
    if (status == stats_reader::open_status::stale)
      return fail(exit_no_process, "process " + std::to_string(*pid) + " has exited");
    return fail(exit_failure, error);
  }
  // Note [Consistent snapshots]
  memory_snapshot snapshot;
  std::vector<std::string> problems;
  int attempts = 0;
  do {
    ++attempts;
    const std::string text =
        page->request_snapshot(std::chrono::milliseconds(static_cast<long>(timeout_seconds * 1000)), error);
    if (text.empty()) return fail(page->process_running() ? exit_no_answer : exit_no_process, error);
    snapshot = memory_snapshot{};
    if (!snapshot_from_json(text, snapshot, error)) return fail(exit_failure, "process sent a bad snapshot: " + error);
    problems = check_snapshot(snapshot);
  } while (!problems.empty() && attempts < kMaxSnapshotAttempts);
  const std::string content = format == "pickle" ? to_pytorch_pickle(snapshot) : to_json(snapshot);
  if (!write_file(output, content, error)) return fail(exit_failure, error);
  std::string note;
  if (!problems.empty())
    note = " (still inconsistent after " + std::to_string(attempts) +
           " attempts: the process changes its memory faster than it answers; first problem: " + problems.front() + ")";
  else if (attempts > 1)
    note = " (retried " + std::to_string(attempts - 1) + (attempts == 2 ? " time" : " times") +
           " until consistent: the process was allocating while it answered)";
  std::fprintf(stderr, "fragless-stats: wrote %zu segments to %s%s\n", snapshot.segments.size(), output.c_str(),
               note.c_str());
  return exit_ok;
}

int run_show(arguments& args) {
  if (args.has_help()) return print_help(show_help);
  std::string path;
  bool no_color = false;
  int cells = 64;
  while (!args.empty()) {
    if (args.take("--no-color")) no_color = true;
    else if (args.take("--cells")) {
      const auto parsed = parse_count(args.next());
      if (!parsed || *parsed > 1000) return fail(exit_usage, "show: --cells N must be 1 to 1000");
      cells = static_cast<int>(*parsed);
    } else if (path.empty()) path = std::string(args.next());
    else return fail(exit_usage, "show: unknown argument \"" + std::string(args.next()) + "\"");
  }
  if (path.empty()) return fail(exit_usage, "show: usage: fragless-stats show FILE");
  memory_snapshot snapshot;
  std::string format, error;
  if (!load_snapshot_file(path, snapshot, format, error)) return fail(exit_failure, error);
  const style look = make_style(no_color);
  std::string out = look.bold(path + " (" + format + "): " + std::to_string(snapshot.segments.size()) + " segments") + "\n";
  for (const std::string& problem : check_snapshot(snapshot)) out += look.warn("inconsistent: " + problem) + "\n";
  std::vector<bool> seen(static_cast<std::size_t>(snapshot.device_count), false);
  for (const snapshot_segment& segment : snapshot.segments)
    if (segment.device >= 0 && segment.device < snapshot.device_count) seen[static_cast<std::size_t>(segment.device)] = true;
  for (int device = 0; device < snapshot.device_count; ++device)
    if (seen[static_cast<std::size_t>(device)]) out += memory_summary(stats_from_snapshot(snapshot, device), device);
  out += segment_map_text(snapshot, look, cells);
  std::fputs(out.c_str(), stdout);
  return exit_ok;
}

int run_map(arguments& args) {
  if (args.has_help()) return print_help(map_help);
  std::string path, output, title;
  while (!args.empty()) {
    if (args.take("-o") || args.take("--output")) {
      if (args.empty()) return fail(exit_usage, "map: -o needs a FILE");
      output = std::string(args.next());
    } else if (args.take("--title")) {
      title = std::string(args.next());
    } else if (path.empty()) {
      path = std::string(args.next());
    } else {
      return fail(exit_usage, "map: unknown argument \"" + std::string(args.next()) + "\"");
    }
  }
  if (path.empty() || output.empty()) return fail(exit_usage, "map: usage: fragless-stats map FILE -o OUT.svg");
  memory_snapshot snapshot;
  std::string format, error;
  if (!load_snapshot_file(path, snapshot, format, error)) return fail(exit_failure, error);
  if (title.empty()) title = "fragless segment map: " + path;
  if (!write_file(output, segment_map_svg(snapshot, title), error)) return fail(exit_failure, error);
  std::fprintf(stderr, "fragless-stats: drew %zu segments to %s\n", snapshot.segments.size(), output.c_str());
  return exit_ok;
}

}  // namespace fragless::cli
