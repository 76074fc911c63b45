// progress_bar: see header.
#include "progress_bar.hpp"

#include <cstdio>
#include <unistd.h>

namespace fragless::bench {

progress_bar::progress_bar(std::size_t total, bool enabled) : total_(total), enabled_(enabled && total > 0) {}

progress_bar::~progress_bar() {
  if (enabled_) std::fputs("\n", stderr);
}

bool progress_bar::stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

void progress_bar::advance(const std::string& label) {
  ++done_;
  if (!enabled_) return;
  constexpr std::size_t width = 30;
  const std::size_t filled = done_ * width / total_;
  std::string bar(filled, '#');
  bar.resize(width, '.');
  std::string shown = label.size() > 48 ? "..." + label.substr(label.size() - 45) : label;
  std::fprintf(stderr, "\r[%s] %zu/%zu %-48s", bar.c_str(), done_, total_, shown.c_str());
  std::fflush(stderr);
}

}  // namespace fragless::bench
