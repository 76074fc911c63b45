// fragless-stats shared helpers; see cli_support.hpp.
#include "cli_support.hpp"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace fragless::cli {

int fail(int code, const std::string& message) {
  std::fprintf(stderr, "fragless-stats: %s\n", message.c_str());
  return code;
}

arguments::arguments(int argc, char** argv, int first) {
  for (int i = first; i < argc; ++i) items_.emplace_back(argv[i]);
}

bool arguments::take(std::string_view flag) noexcept {
  if (!empty() && items_[position_] == flag) {
    ++position_;
    return true;
  }
  return false;
}

bool arguments::has_help() const noexcept {
  for (std::size_t i = position_; i < items_.size(); ++i)
    if (items_[i] == "--help" || items_[i] == "-h") return true;
  return false;
}

std::optional<long> parse_pid(std::string_view text) {
  long value = 0;
  const auto [end, code] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (code != std::errc{} || end != text.data() + text.size() || value <= 0 || value > 4194304) return std::nullopt;
  return value;
}

std::optional<double> parse_seconds(std::string_view text) {
  const std::string copy(text);
  char* end = nullptr;
  const double value = std::strtod(copy.c_str(), &end);
  if (copy.empty() || end != copy.c_str() + copy.size() || !std::isfinite(value) || value < 0.01 || value > 86400)
    return std::nullopt;
  return value;
}

std::optional<long> parse_count(std::string_view text) {
  long value = 0;
  const auto [end, code] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (code != std::errc{} || end != text.data() + text.size() || value < 1) return std::nullopt;
  return value;
}

bool take_watch_option(arguments& args, watch_options& options, std::string& error) {
  if (args.take("--watch")) {
    options.watch = true;
    if (!args.empty() && args.peek().substr(0, 2) != "--") {
      const auto seconds = parse_seconds(args.next());
      if (seconds) options.interval_seconds = *seconds;
      else error = "--watch SECONDS must be a number from 0.01 to 86400";
    }
    return true;
  }
  if (args.take("--count")) {
    const auto parsed = parse_count(args.next());
    if (parsed) options.count = *parsed;
    else error = "--count N must be a positive integer";
    return true;
  }
  return false;
}

std::string check_watch_options(const watch_options& options) {
  return options.count > 0 && !options.watch ? "--count needs --watch" : "";
}

std::string style::bold(std::string_view text) const {
  return color ? "\033[1m" + std::string(text) + "\033[0m" : std::string(text);
}
std::string style::warn(std::string_view text) const {
  return color ? "\033[33m" + std::string(text) + "\033[0m" : std::string(text);
}
std::string style::bad(std::string_view text) const {
  return color ? "\033[31m" + std::string(text) + "\033[0m" : std::string(text);
}

style make_style(bool no_color_flag) {
  style s;
  s.color = !no_color_flag && std::getenv("NO_COLOR") == nullptr && ::isatty(STDOUT_FILENO) == 1;
  return s;
}

std::string percent(double ratio) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f%%", ratio * 100.0);
  return buffer;
}

bool write_file(const std::string& path, std::string_view content, std::string& error) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    error = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  out.close();
  if (!out) {
    error = "cannot write " + path;
    return false;
  }
  return true;
}

bool read_file(const std::string& path, std::string& content, std::string& error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot read " + path + ": " + std::strerror(errno);
    return false;
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  content = buffer.str();
  return true;
}

}  // namespace fragless::cli
