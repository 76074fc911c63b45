// `fragless-stats [list]`: every process publishing fragless stats, one row per device.
// Stale pages of processes that are gone are removed (unless --keep-stale); pages that
// cannot be read are reported on stderr and skipped.
#include <cstdio>
#include <ctime>

#include "commands.hpp"
#include "fragless/options.hpp"
#include "stats_output.hpp"

namespace fragless::cli {
namespace {

constexpr const char* list_help =
    "usage: fragless-stats [list] [--json | --csv] [--no-color] [--keep-stale]\n"
    "\n"
    "Lists the processes of this user that publish fragless stats: pid, command, device,\n"
    "allocated and reserved bytes, fragmentation (1 - largest free block / unused reserved),\n"
    "and the age of the last update. Pages of exited processes are removed.\n"
    "  --json        one JSON document (schema fragless.process_list/1, see tools/README.md)\n"
    "  --csv         CSV, one row per device with every stats field\n"
    "  --no-color    no terminal colours (also when NO_COLOR is set or stdout is no terminal)\n"
    "  --keep-stale  list stale pages instead of removing them\n";

std::string age_text(std::int64_t published_ns) {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  const double age = (static_cast<double>(now.tv_sec) * 1e9 + static_cast<double>(now.tv_nsec) -
                      static_cast<double>(published_ns)) / 1e9;
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1fs ago", age < 0 ? 0.0 : age);
  return buffer;
}

}  // namespace

int run_list(arguments& args) {
  if (args.has_help()) {
    std::fputs(list_help, stdout);
    std::fputs(exit_codes_help.data(), stdout);
    return exit_ok;
  }
  bool as_json = false, as_csv = false, no_color = false, keep_stale = false;
  while (!args.empty()) {
    if (args.take("--json")) as_json = true;
    else if (args.take("--csv")) as_csv = true;
    else if (args.take("--no-color")) no_color = true;
    else if (args.take("--keep-stale")) keep_stale = true;
    else return fail(exit_usage, "list: unknown argument \"" + std::string(args.next()) + "\" (see --help)");
  }
  if (as_json && as_csv) return fail(exit_usage, "list: --json and --csv exclude each other");
  const style look = make_style(no_color);
  std::string error;
  auto entries = stats_reader::list_pages(!keep_stale, error);
  if (!error.empty()) return fail(exit_failure, error);

  json::value processes = json::value::make_array();
  json::value errors = json::value::make_array();
  std::string text;
  if (as_csv) text += csv_header();
  char line[512];
  if (!as_json && !as_csv) {
    std::snprintf(line, sizeof line, "%-8s %-16s %-6s %14s %14s %13s  %s\n", "PID", "COMMAND", "DEVICE", "ALLOCATED",
                  "RESERVED", "FRAGMENTATION", "UPDATED");
    text += look.bold(line);
  }
  std::size_t shown = 0;
  for (auto& entry : entries) {
    if (entry.status != stats_reader::open_status::ok &&
        !(entry.status == stats_reader::open_status::stale && entry.opened)) {
      std::fprintf(stderr, "fragless-stats: skipped %s\n", entry.error.c_str());
      json::value e = json::value::make_object();
      e.set("file", json::value::make_string(entry.file_name));
      e.set("error", json::value::make_string(entry.error));
      errors.push(std::move(e));
      continue;
    }
    const auto& page = *entry.opened;
    const auto devices = page.read_devices();
    ++shown;
    if (as_json) {
      json::value process = process_json(page.pid(), page.command(), devices);
      if (entry.status == stats_reader::open_status::stale) process.set("stale", json::value::make_bool(true));
      processes.push(std::move(process));
      continue;
    }
    if (as_csv) {
      text += csv_rows(page.pid(), page.command(), devices);
      continue;
    }
    const std::string command = page.command() + (entry.status == stats_reader::open_status::stale ? " (exited)" : "");
    if (devices.empty()) {
      std::snprintf(line, sizeof line, "%-8d %-16.16s %-6s %14s %14s %13s  %s\n", static_cast<int>(page.pid()),
                    command.c_str(), "-", "-", "-", "-", "no device used yet");
      text += line;
    }
    for (const auto& reading : devices) {
      const double fragmentation = stat_fragmentation(reading.stats);
      std::string fragmentation_text = percent(fragmentation);
      char padded[32];
      std::snprintf(padded, sizeof padded, "%13s", fragmentation_text.c_str());
      fragmentation_text = fragmentation >= 0.5 ? look.bad(padded) : fragmentation >= 0.2 ? look.warn(padded) : padded;
      std::snprintf(line, sizeof line, "%-8d %-16.16s %-6d %14s %14s %s  %s\n", static_cast<int>(page.pid()),
                    command.c_str(), reading.device,
                    format_bytes_readable(static_cast<double>(reading.stats.allocated_bytes[pool_all].current)).c_str(),
                    format_bytes_readable(static_cast<double>(reading.stats.reserved_bytes[pool_all].current)).c_str(),
                    fragmentation_text.c_str(), age_text(reading.published_ns).c_str());
      text += line;
    }
  }
  if (as_json) {
    json::value root = json::value::make_object();
    root.set("schema", json::value::make_string("fragless.process_list/1"));
    root.set("processes", std::move(processes));
    root.set("errors", std::move(errors));
    text = json::write(root);
  } else if (!as_csv && shown == 0) {
    text = "no process of this user publishes fragless stats\n";
  }
  std::fputs(text.c_str(), stdout);
  return exit_ok;
}

}  // namespace fragless::cli
