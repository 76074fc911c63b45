// Runs a program with arguments, capturing stdout, stderr and the exit code; and a child
// process handle for long-running fixtures. Test support only.
#pragma once

#include <string>
#include <sys/types.h>
#include <vector>

namespace fragless::testing {

struct run_result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

run_result run(const std::vector<std::string>& argv);

// A child with a pipe to its stdin (closing it ends publisher_fixture) and its stdout.
class child_process {
 public:
  explicit child_process(const std::vector<std::string>& argv);
  ~child_process();
  pid_t pid() const noexcept { return pid_; }
  // Reads one line from the child's stdout (empty on EOF).
  std::string read_line();
  void kill_hard();   // SIGKILL, no exit handlers: leaves a stale page behind
  int finish();       // closes stdin, waits, returns the exit code

 private:
  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
};

}  // namespace fragless::testing
