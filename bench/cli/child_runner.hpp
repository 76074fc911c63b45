// child_runner: runs one (trace, allocator) replay in a fresh child process (this program,
// hidden command replay-one) and reads its outcome back over a pipe. See
// Note [One child per replay].
// Invariant: whatever the child does (crash, hang, garbage), the parent gets an outcome
// whose status says what happened; the parent itself never crashes because of a peer.
#pragma once

#include "replay/replayer.hpp"

#include <string>
#include <utility>
#include <vector>

namespace fragless::bench {

// Note [One child per replay]
// PyTorch's allocator is process-global, reads PYTORCH_CUDA_ALLOC_CONF once, and cannot be
// reset; simcuda's counters and capacity are process-global too. A child per replay gives
// every peer a fresh device and fresh settings, and turns a crash into a row status. The
// child's environment carries the peer's settings (PYTORCH_CUDA_ALLOC_CONF, FRAGLESS_CONF).

struct child_request {
  std::string source;          // "file:PATH" or "builtin:SPEC"
  std::string allocator;       // peer name
  std::string configuration;   // fragless configuration (FRAGLESS_CONF) for named configurations
  int repetitions = 1;
  std::size_t max_events = 0;
  std::uint64_t capacity_bytes = 0;  // 0 = the device's own (simcuda's default, or a GPU's)
  std::uint64_t device_call_ns = 0;  // simcuda only
  std::uint64_t host_work_ns = 0;    // Note [Host work]
  // Note [Counting device calls]: LD_PRELOADed into the child (empty = simcuda counts).
  std::string counting_library;
  int timeout_seconds = 600;
  std::string call_log_path;  // Note [Call log]: empty = no log
  bool pass_stderr = false;  // --verbose: the child's stderr goes to ours instead of a scratch file
};

struct child_result {
  replay_outcome outcome;
  std::string unavailable_reason;  // peer could not be created
};

child_result run_child(const child_request& request);

// This program run again as a child (`fragless-bench ARGUMENTS...`, arguments[0] is
// replaced by its path) with `environment`; its stdout, and its last stderr line when it
// failed. The child's stderr goes to ours when pass_stderr.
struct self_run {
  std::string output;
  std::string status;  // empty when it exited 0; else what happened, with its last stderr line
};
self_run run_self(std::vector<std::string> arguments, const std::vector<std::string>& environment, bool pass_stderr);

// The child's side of the device probe (command device-info, replay/cuda_device.hpp):
// "ok|name|total_bytes|free_bytes|error<TAB>value" lines on stdout. Returns the exit code.
int device_info_main();

// The child side: encodes an outcome as text lines on stdout.
std::string encode_outcome(const replay_outcome& outcome, const std::string& unavailable_reason);
child_result decode_outcome(const std::string& text);

// Runs inside the child (command replay-one). Returns the process exit code.
int replay_one_main(const child_request& request);

}  // namespace fragless::bench
