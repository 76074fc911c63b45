// The fragless-stats subcommands. Each takes the arguments after its name and returns
// an exit code (cli_support.hpp).
#pragma once

#include "cli_support.hpp"

namespace fragless::cli {

int run_list(arguments& args);
int run_process(long pid, arguments& args);
int run_snapshot(arguments& args);
int run_show(arguments& args);
int run_map(arguments& args);
int run_options(arguments& args);

}  // namespace fragless::cli
