// `fragless-stats [list]`: every process publishing fragless stats, one row per device.
// Pages of processes that are provably gone are removed (unless --keep-stale); pages that
// cannot be read or are corrupt are reported on stderr and skipped; process names are
// shown made printable (stats_reader::printable_text). --watch redraws every SECONDS.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <thread>

#include "commands.hpp"
#include "fragless/options.hpp"
#include "device_memory_info.hpp"
#include "stats_output.hpp"

namespace fragless::cli {
namespace {

constexpr const char* list_help =
    "usage: fragless-stats [list] [--json | --csv] [--no-color] [--keep-stale] [--watch [SECONDS]] [--count N]\n"
    "\n"
    "Lists the processes of this user that publish fragless stats: pid, command, device,\n"
    "allocated and reserved bytes, fragmentation (1 - largest free block / unused reserved),\n"
    "the device's total and free memory (from NVML; \"-\" without it), and the age of the last\n"
    "update. Pages of exited processes are removed; a page written in another PID namespace\n"
    "(a container sharing the stats directory) is listed with \"(other pid namespace)\" and\n"
    "never removed.\n"
    "  --json           one JSON document (schema fragless.process_list/1, see tools/README.md)\n"
    "  --csv            CSV, one row per device with every stats field\n"
    "  --no-color       no terminal colours (also when NO_COLOR is set or stdout is no terminal)\n"
    "  --keep-stale     list stale pages, marked \"(exited)\", instead of removing them\n"
    "  --watch [SECS]   redraw every SECS seconds (default 1) until interrupted\n"
    "  --count N        with --watch: stop after N updates\n";

std::string age_text(std::int64_t published_ns) {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  const double age = (static_cast<double>(now.tv_sec) * 1e9 + static_cast<double>(now.tv_nsec) -
                      static_cast<double>(published_ns)) / 1e9;
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1fs ago", age < 0 ? 0.0 : age);
  return buffer;
}

// The COMMAND cell: at most 16 bytes of the (printable) name, cut neither inside a UTF-8
// character nor inside a "\xNN" escape, then the whole marker.
std::string command_cell(const std::string& command, const char* marker) {
  std::size_t cut = std::min<std::size_t>(command.size(), 16);
  if (cut < command.size()) {
    while (cut > 0 && (static_cast<unsigned char>(command[cut]) & 0xc0) == 0x80) --cut;
    for (std::size_t back = 1; back <= 3 && back <= cut; ++back)
      if (command[cut - back] == '\\' && (back < 2 || command[cut - back + 1] == 'x')) {
        cut -= back;
        break;
      }
  }
  std::string cell = command.substr(0, cut);
  cell += marker;
  if (cell.size() < 16) cell.append(16 - cell.size(), ' ');
  return cell;
}

struct list_settings {
  bool as_json = false, as_csv = false, keep_stale = false;
  bool watch = false;  // JSON: one document per line
};

// One rendering of the list. Returns the text for stdout; skipped pages go to stderr.
std::string render_list(const list_settings& settings, const style& look, bool csv_header_wanted, std::string& error) {
  auto entries = stats_reader::list_pages(!settings.keep_stale, error);
  if (!error.empty()) return {};
  device_memory_info device_memory;

  json::value processes = json::value::make_array();
  json::value errors = json::value::make_array();
  std::string text;
  if (settings.as_csv && csv_header_wanted) text += csv_header();
  char line[640];
  if (!settings.as_json && !settings.as_csv) {
    std::snprintf(line, sizeof line, "%-8s %-16s %-6s %12s %12s %13s %12s %12s  %s\n", "PID", "COMMAND", "DEVICE",
                  "ALLOCATED", "RESERVED", "FRAGMENTATION", "DEV TOTAL", "DEV FREE", "UPDATED");
    text += look.bold(line);
  }
  std::size_t shown = 0;
  for (auto& entry : entries) {
    if (entry.status != stats_reader::open_status::ok &&
        !(entry.status == stats_reader::open_status::stale && entry.opened)) {
      std::fprintf(stderr, "fragless-stats: skipped %s\n", entry.error.c_str());
      json::value e = json::value::make_object();
      e.set("file", json::value::make_string(stats_reader::printable_text(entry.file_name)));
      e.set("error", json::value::make_string(stats_reader::printable_text(entry.error)));
      errors.push(std::move(e));
      continue;
    }
    const auto& page = *entry.opened;
    std::string corrupt;
    const auto devices = page.read_devices(&corrupt);
    if (!corrupt.empty()) {
      const std::string message = entry.file_name + ": corrupt stats page (" + corrupt + ")";
      std::fprintf(stderr, "fragless-stats: skipped %s\n", stats_reader::printable_text(message).c_str());
      json::value e = json::value::make_object();
      e.set("file", json::value::make_string(stats_reader::printable_text(entry.file_name)));
      e.set("error", json::value::make_string(stats_reader::printable_text(message)));
      errors.push(std::move(e));
      continue;
    }
    const bool stale = entry.status == stats_reader::open_status::stale;
    const bool other_namespace = !stale && page.other_namespace();
    ++shown;
    if (settings.as_json) {
      json::value process = process_json(page.pid(), page.command(), devices);
      if (stale) process.set("stale", json::value::make_bool(true));
      if (other_namespace) process.set("other_pid_namespace", json::value::make_bool(true));
      processes.push(std::move(process));
      continue;
    }
    if (settings.as_csv) {
      text += csv_rows(page.pid(), page.command(), devices);
      continue;
    }
    const std::string command =
        command_cell(page.command(), stale ? " (exited)" : other_namespace ? " (other pid namespace)" : "");
    if (devices.empty()) {
      std::snprintf(line, sizeof line, "%-8d %s %-6s %12s %12s %13s %12s %12s  %s\n", static_cast<int>(page.pid()),
                    command.c_str(), "-", "-", "-", "-", "-", "-", "no device used yet");
      text += line;
    }
    for (const auto& reading : devices) {
      const double fragmentation = stat_fragmentation(reading.stats);
      std::string fragmentation_text = percent(fragmentation);
      char padded[32];
      std::snprintf(padded, sizeof padded, "%13s", fragmentation_text.c_str());
      fragmentation_text = fragmentation >= 0.5 ? look.bad(padded) : fragmentation >= 0.2 ? look.warn(padded) : padded;
      const auto memory = device_memory.query(reading.device);
      std::snprintf(line, sizeof line, "%-8d %s %-6d %12s %12s %s %12s %12s  %s\n", static_cast<int>(page.pid()),
                    command.c_str(), reading.device,
                    format_bytes_readable(static_cast<double>(reading.stats.allocated_bytes[pool_all].current)).c_str(),
                    format_bytes_readable(static_cast<double>(reading.stats.reserved_bytes[pool_all].current)).c_str(),
                    fragmentation_text.c_str(),
                    memory ? format_bytes_readable(static_cast<double>(memory->total_bytes)).c_str() : "-",
                    memory ? format_bytes_readable(static_cast<double>(memory->free_bytes)).c_str() : "-",
                    age_text(reading.published_ns).c_str());
      text += line;
    }
  }
  if (settings.as_json) {
    json::value root = json::value::make_object();
    root.set("schema", json::value::make_string("fragless.process_list/1"));
    root.set("processes", std::move(processes));
    root.set("errors", std::move(errors));
    text = json::write(root, !settings.watch);
  } else if (!settings.as_csv && shown == 0) {
    text = "no process of this user publishes fragless stats\n";
  }
  return text;
}

}  // namespace

int run_list(arguments& args) {
  if (args.has_help()) {
    std::fputs(list_help, stdout);
    std::fputs(exit_codes_help.data(), stdout);
    return exit_ok;
  }
  list_settings settings;
  bool no_color = false;
  watch_options watching;
  std::string usage_error;
  while (!args.empty()) {
    if (args.take("--json")) settings.as_json = true;
    else if (args.take("--csv")) settings.as_csv = true;
    else if (args.take("--no-color")) no_color = true;
    else if (args.take("--keep-stale")) settings.keep_stale = true;
    else if (take_watch_option(args, watching, usage_error)) {
      if (!usage_error.empty()) return fail(exit_usage, "list: " + usage_error);
    } else {
      return fail(exit_usage, "list: unknown argument \"" + std::string(args.next()) + "\" (see --help)");
    }
  }
  if (settings.as_json && settings.as_csv) return fail(exit_usage, "list: --json and --csv exclude each other");
  if (usage_error = check_watch_options(watching); !usage_error.empty()) return fail(exit_usage, "list: " + usage_error);
  const bool watch = settings.watch = watching.watch;
  const double interval_seconds = watching.interval_seconds;
  const long count = watching.count;
  const style look = make_style(no_color);
  for (long frame = 0; count < 0 || frame < count; ++frame) {
    if (frame > 0) std::this_thread::sleep_for(std::chrono::duration<double>(interval_seconds));
    std::string error;
    std::string text = render_list(settings, look, frame == 0, error);
    if (!error.empty()) return fail(exit_failure, error);
    if (watch && !settings.as_json && !settings.as_csv) {
      std::string head;
      if (look.color) head += "\033[H\033[2J";
      const std::time_t now = std::time(nullptr);
      char stamp[64];
      std::strftime(stamp, sizeof stamp, "%H:%M:%S", std::localtime(&now));
      char title[160];
      std::snprintf(title, sizeof title, "Every %.2fs: fragless-stats list  (%s)\n", interval_seconds, stamp);
      text = head + look.bold(title) + text;
    }
    if (watch && settings.as_json) {
      while (!text.empty() && text.back() == '\n') text.pop_back();
      text += "\n";
    }
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
    if (!watch) break;
  }
  return exit_ok;
}

}  // namespace fragless::cli
