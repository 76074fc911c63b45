// `fragless-stats PID`: the memory_summary table of each device a process uses, as text,
// JSON (Note [CLI JSON] in stats_output.hpp) or CSV; --watch redraws every SECONDS.
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <thread>
#include <unistd.h>

#include "commands.hpp"
#include "stats_directory.hpp"
#include "stats_output.hpp"

namespace fragless::cli {
namespace {

constexpr const char* process_help =
    "usage: fragless-stats PID [--json | --csv] [--watch [SECONDS]] [--count N] [--abbreviated] [--no-color]\n"
    "\n"
    "Prints, for every device process PID uses, the memory summary table (the layout of\n"
    "torch.cuda.memory_summary(), plus fragless's own figures).\n"
    "  --json           JSON (schema fragless.process_stats/1; with --watch one document per line)\n"
    "  --csv            CSV, one row per device (with --watch the header is printed once)\n"
    "  --watch [SECS]   redraw every SECS seconds (default 1) until interrupted\n"
    "  --count N        with --watch: stop after N updates\n"
    "  --abbreviated    omit the per-pool rows of the table\n"
    "  --no-color       no terminal escapes (also when NO_COLOR is set or stdout is no terminal)\n";

// Why a page could not be opened, as the one-line message and exit code.
int explain_open_failure(long pid, stats_reader::open_status status, const std::string& error,
                         const std::string& file_name = {}) {
  switch (status) {
    case stats_reader::open_status::missing:
      if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
        return fail(exit_no_process, "no process " + std::to_string(pid));
      return fail(exit_no_process, "process " + std::to_string(pid) +
                                       " does not publish fragless stats (not using fragless, another user's, or "
                                       "publish_stats:False)");
    case stats_reader::open_status::stale: {
      std::string ignored;
      const int directory_fd = stats_directory::open_directory(false, ignored);
      if (directory_fd >= 0) {
        // Stale means provably gone (Note [Stats pages across PID namespaces]).
        const std::string name = file_name.empty() ? stats_directory::page_file_name(static_cast<pid_t>(pid)) : file_name;
        ::unlinkat(directory_fd, name.c_str(), 0);
        ::close(directory_fd);
      }
      return fail(exit_no_process, "process " + std::to_string(pid) + " has exited (its stale stats page was removed)");
    }
    case stats_reader::open_status::refused: return fail(exit_failure, error);
    case stats_reader::open_status::bad_format: return fail(exit_failure, error);
    case stats_reader::open_status::ok: break;
  }
  return fail(exit_failure, error);
}

}  // namespace

int run_process(long pid, arguments& args) {
  if (args.has_help()) {
    std::fputs(process_help, stdout);
    std::fputs(exit_codes_help.data(), stdout);
    return exit_ok;
  }
  bool as_json = false, as_csv = false, no_color = false, abbreviated = false;
  watch_options watching;
  std::string usage_error;
  while (!args.empty()) {
    if (args.take("--json")) as_json = true;
    else if (args.take("--csv")) as_csv = true;
    else if (args.take("--no-color")) no_color = true;
    else if (args.take("--abbreviated")) abbreviated = true;
    else if (take_watch_option(args, watching, usage_error)) {
      if (!usage_error.empty()) return fail(exit_usage, usage_error);
    } else {
      return fail(exit_usage, "unknown argument \"" + std::string(args.next()) + "\" (see fragless-stats PID --help)");
    }
  }
  if (as_json && as_csv) return fail(exit_usage, "--json and --csv exclude each other");
  if (usage_error = check_watch_options(watching); !usage_error.empty()) return fail(exit_usage, usage_error);
  const bool watch = watching.watch;
  const double interval_seconds = watching.interval_seconds;
  const long count = watching.count;
  const style look = make_style(no_color);

  stats_reader::open_status status{};
  std::string error;
  auto page = stats_reader::page::open(static_cast<pid_t>(pid), status, error);
  if (!page || status != stats_reader::open_status::ok)
    return explain_open_failure(pid, status, error, page ? page->file_name() : std::string());

  for (long frame = 0; count < 0 || frame < count; ++frame) {
    if (frame > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double>(interval_seconds));
      if (!page->process_running())
        return explain_open_failure(pid, stats_reader::open_status::stale, "", page->file_name());
    }
    std::string corrupt;
    const auto devices = page->read_devices(&corrupt);
    if (!corrupt.empty())
      return fail(exit_failure, stats_reader::printable_text(page->file_name() + ": corrupt stats page (" + corrupt + ")"));
    std::string out;
    if (as_json) {
      json::value root = json::value::make_object();
      root.set("schema", json::value::make_string("fragless.process_stats/1"));
      const json::value process = process_json(pid, page->command(), devices);
      for (const auto& [key, value] : process.members()) root.set(key, value);
      out = json::write(root, !watch);
      if (watch) out += "\n";
    } else if (as_csv) {
      if (frame == 0) out += csv_header();
      out += csv_rows(pid, page->command(), devices);
    } else {
      if (watch) {
        if (look.color) out += "\033[H\033[2J";
        const std::time_t now = std::time(nullptr);
        char stamp[64];
        std::strftime(stamp, sizeof stamp, "%H:%M:%S", std::localtime(&now));
        char head[160];
        std::snprintf(head, sizeof head, "Every %.2fs: fragless-stats %ld  (%s)\n", interval_seconds, pid, stamp);
        out += look.bold(head);
      }
      out += "process " + std::to_string(pid) + " (" + page->command() + ")\n";
      if (devices.empty()) out += "no device used yet\n";
      for (const auto& reading : devices) out += memory_summary(reading.stats, reading.device, abbreviated);
    }
    std::fputs(out.c_str(), stdout);
    std::fflush(stdout);
    if (!watch) break;
  }
  return exit_ok;
}

}  // namespace fragless::cli
