// progress_bar: a one-line progress bar on stderr for long runs, shown only when stderr is
// a terminal or when asked (--progress). Invariant: never writes to stdout.
#pragma once
#include <cstddef>
#include <string>
namespace fragless::bench {
class progress_bar {
public:
  progress_bar(std::size_t total, bool enabled);
  ~progress_bar();
  void advance(const std::string& label);
  static bool stderr_is_terminal();

private:
  std::size_t total_;
  std::size_t done_ = 0;
  bool enabled_;
};
}  // namespace fragless::bench
