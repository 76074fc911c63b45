// Shared pieces of fragless-stats: exit codes, argument scanning, colour, number
// formatting. Invariant: every command reports failure as one line on stderr starting
// with "fragless-stats: " and returns one of the exit codes below.
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fragless::cli {

// Exit codes (documented in --help and tools/README.md).
enum exit_code : int {
  exit_ok = 0,
  exit_failure = 1,         // could not read or write a file, corrupt or unsupported data
  exit_usage = 2,           // bad command line
  exit_no_process = 3,      // no such process, not using fragless, or its page is stale
  exit_no_answer = 4,       // the process did not answer a snapshot request in time
};

inline constexpr std::string_view exit_codes_help =
    "Exit codes:\n"
    "  0  success\n"
    "  1  failure: unreadable/unwritable file, corrupt or unsupported data\n"
    "  2  usage error\n"
    "  3  no such process, not using fragless, or it has exited\n"
    "  4  the process did not answer a snapshot request in time\n";

// Prints "fragless-stats: <message>" on stderr and returns `code`.
int fail(int code, const std::string& message);

// Simple argument cursor over argv[first..].
class arguments {
 public:
  arguments(int argc, char** argv, int first);
  bool empty() const noexcept { return position_ >= items_.size(); }
  std::string_view peek() const noexcept { return empty() ? std::string_view{} : items_[position_]; }
  std::string_view next() noexcept { return empty() ? std::string_view{} : items_[position_++]; }
  // True (and consumed) when the next argument is `flag`.
  bool take(std::string_view flag) noexcept;
  bool has_help() const noexcept;

 private:
  std::vector<std::string_view> items_;
  std::size_t position_ = 0;
};

std::optional<long> parse_pid(std::string_view text);
std::optional<double> parse_seconds(std::string_view text);
std::optional<long> parse_count(std::string_view text);

// --watch [SECONDS] and --count N, as `list` and `PID` take them.
struct watch_options {
  bool watch = false;
  double interval_seconds = 1.0;  // between updates
  long count = -1;                // updates before stopping; -1: until interrupted
};
// Takes --watch [SECONDS] or --count N when one comes next and answers whether it took one;
// a bad value sets `error` ("--watch SECONDS must be ..."). check_watch_options: the
// combination's error ("--count needs --watch"), or empty.
bool take_watch_option(arguments& args, watch_options& options, std::string& error);
std::string check_watch_options(const watch_options& options);

// Colour: on when stdout is a terminal, NO_COLOR is unset and --no-color was not given.
struct style {
  bool color = false;
  std::string bold(std::string_view text) const;
  std::string warn(std::string_view text) const;  // yellow
  std::string bad(std::string_view text) const;   // red
};
style make_style(bool no_color_flag);

std::string percent(double ratio);

bool write_file(const std::string& path, std::string_view content, std::string& error);
bool read_file(const std::string& path, std::string& content, std::string& error);

}  // namespace fragless::cli
