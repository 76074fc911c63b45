// `fragless-stats options [--markdown]`: the FRAGLESS_CONF options table, from the one
// options list (the README's table is this command's --markdown output).
#include <cstdio>
#include <iostream>

#include "commands.hpp"
#include "fragless/options.hpp"

namespace fragless::cli {

int run_options(arguments& args) {
  if (args.has_help()) {
    std::fputs("usage: fragless-stats options [--markdown]\n\n"
               "Prints every FRAGLESS_CONF option with its default, accepted values and meaning;\n"
               "--markdown prints the same table in Markdown (as in the README).\n",
               stdout);
    std::fputs(exit_codes_help.data(), stdout);
    return exit_ok;
  }
  bool markdown = false;
  while (!args.empty()) {
    if (args.take("--markdown")) markdown = true;
    else return fail(exit_usage, "options: unknown argument \"" + std::string(args.next()) + "\"");
  }
  if (markdown) std::fputs(options_markdown_table().c_str(), stdout);
  else print_options_help(std::cout);
  return exit_ok;
}

}  // namespace fragless::cli
