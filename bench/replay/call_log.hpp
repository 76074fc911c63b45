// call_log: one replay's device calls, event by event, as CSV (Note [Call log]).
// Invariant: a row is written for every replayed event (and every end-of-pass free) after
// which the device-call counters moved, and the deltas of one pass's rows sum to that pass's
// figure in calls_by_pass (allocs + frees + maps + unmaps).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "replay/device_counters.hpp"

namespace fragless::bench {

// Note [Call log]
// Which event made a device call, and what reserved and live memory were then, is the first
// question about a workload that keeps calling the device (a page created in the fifth pass,
// a loop's hand-over moving pages): the replay's figures say how many, not where.
// `--call-log DIR` writes, for each (workload, allocator) replayed, DIR/<workload>.<allocator>.csv
// with a row per event after which a counter moved: its pass (1-based), event index (the
// trace's; end-of-pass frees of blocks still live use the trace's length), op, size, stream,
// the allocator's reserved bytes and the live bytes after it, and the calls it made by kind.
// Only the counters the replay already reads are used (simcuda's or the interposer's), so a
// logged replay makes the same device calls as an unlogged one; its host time is not
// comparable (the log is written between timed calls).
class call_log {
public:
  call_log() = default;
  call_log(const call_log&) = delete;
  call_log& operator=(const call_log&) = delete;
  ~call_log();

  // Opens `path` for writing and writes the header; false (with `error` set) if it cannot.
  bool open(const std::string& path, std::string& error);
  bool is_open() const { return file_ != nullptr; }

  // The counters' values from which the next row's deltas are taken (a pass's start, or
  // after counters.reset()).
  void start_from(const device_counters& counters);

  // Whether the counters moved since the last row (or start_from); reads them once.
  bool moved(const device_counters& counters);
  // The row of what moved, as moved() last read it.
  void write(int pass, std::size_t event, const char* op, std::uint64_t size_bytes, std::size_t stream_index,
             std::uint64_t reserved_bytes, std::uint64_t live_bytes);

private:
  struct snapshot {
    device_call_counts counts;
    std::uint64_t set_access = 0, event_calls = 0;
    bool operator==(const snapshot&) const = default;
  };
  static snapshot read(const device_counters& counters);
  std::FILE* file_ = nullptr;
  snapshot last_, now_;
};

}  // namespace fragless::bench
