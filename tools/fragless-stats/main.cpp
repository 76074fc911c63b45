// fragless-stats: live stats of processes using fragless, snapshots and segment maps.
// Dispatches to one subcommand; see `fragless-stats --help` and tools/README.md.
#include <cstdio>
#include <string_view>

#include "commands.hpp"
#include "stats_page.hpp"

namespace {

constexpr const char* main_help =
    "usage: fragless-stats [list] [--json | --csv] [--watch [SECONDS]] [--no-color]\n"
    "                                                    list processes using fragless\n"
    "       fragless-stats PID [--json | --csv] [--watch [SECONDS]] [--count N] [--no-color]\n"
    "                                                    memory summary of each device\n"
    "       fragless-stats snapshot PID -o FILE [--format json|pickle]   take a snapshot\n"
    "       fragless-stats show FILE                     summary + text segment map of a snapshot\n"
    "       fragless-stats map FILE -o OUT.svg           SVG segment map of a snapshot\n"
    "       fragless-stats options [--markdown]          the FRAGLESS_CONF options\n"
    "       fragless-stats COMMAND --help                help on one command\n"
    "       fragless-stats --version                     version of fragless-stats and of its stats page\n"
    "\n"
    "Processes publish stats unless FRAGLESS_CONF contains publish_stats:False. Only your\n"
    "own processes are visible (pages live in $XDG_RUNTIME_DIR/fragless or\n"
    "/dev/shm/fragless-<uid>, mode 0700).\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace fragless::cli;
  const std::string_view command = argc > 1 ? std::string_view(argv[1]) : std::string_view("list");
  if (command == "--help" || command == "-h" || command == "help") {
    std::fputs(main_help, stdout);
    std::fputs(exit_codes_help.data(), stdout);
    return exit_ok;
  }
  if (command == "--version" || command == "-V") {
    std::printf("fragless-stats %s (stats page version %u)\n", FRAGLESS_STATS_VERSION, fragless::stats_page::version);
    return exit_ok;
  }
  // Flags without a command belong to `list`.
  if (argc > 1 && command.substr(0, 2) == "--") {
    arguments args(argc, argv, 1);
    return run_list(args);
  }
  arguments args(argc, argv, argc > 1 ? 2 : 1);
  if (command == "list") return run_list(args);
  if (command == "snapshot") return run_snapshot(args);
  if (command == "show") return run_show(args);
  if (command == "map") return run_map(args);
  if (command == "options") return run_options(args);
  if (const auto pid = parse_pid(command)) return run_process(*pid, args);
  return fail(exit_usage, "unknown command \"" + std::string(command) + "\" (see fragless-stats --help)");
}
