// The race oracle; see race_oracle.h.
//
// Note [Race rule]
// When an op (simulated kernel, async copy or memset) is launched on stream S, it races with
// every still-pending op P of another stream T such that
//   - S's op is not ordered after P: its captured clock has clock[T] < P.sequence
//     (Note [Vector clocks]), and
//   - their ranges overlap and at least one of the two writes (two reads never race).
// Also a race: an op touching a range that is not entirely allocated and accessible at
// launch, and freeing/unmapping a range that a pending op touches. Completed ops never race:
// a test that synchronizes (or advances) before reusing memory is correct.
#include "race_oracle.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>

#include "device_memory.h"
#include "env_parse.h"

namespace simcuda {
namespace {

constexpr size_t kMaxKeptReports = 1000;

std::string describe(const PendingOp& op, const Stream& stream, const Access& access) {
  char text[200];
  std::snprintf(text, sizeof text, "%s %" PRIu64 " on stream %" PRIu64 " (%s [0x%" PRIxPTR ", 0x%" PRIxPTR "))",
                op.what.c_str(), op.kernel_id, stream.id, access.writes ? "writes" : "reads", access.begin,
                access.end);
  return text;
}

// SIMCUDA_ABORT_ON_RACE=1: the first race aborts the process where it is found, so a
// debugger or core dump shows the call that raced (read once).
bool abort_on_race() {
  static const bool enabled = env_string("SIMCUDA_ABORT_ON_RACE").value_or("0") != "0";
  return enabled;
}

}  // namespace

void report_race_locked(std::string text) {
  State& self = state();
  ++self.race_count;
  if (abort_on_race()) {
    std::fprintf(stderr, "simcuda: %s\nsimcuda: SIMCUDA_ABORT_ON_RACE is set: aborting\n", text.c_str());
    std::abort();
  }
  if (self.race_reports.size() < kMaxKeptReports) self.race_reports.push_back(std::move(text));
}

void check_launch_races_locked(const Stream& stream, const PendingOp& op) {
  State& self = state();
  for (const Access& access : op.accesses) {
    if (!is_accessible_locked(access.begin, access.end - access.begin))
      report_race_locked("race: " + describe(op, stream, access) + " touches memory that is not allocated/mapped");
  }
  for (const auto& [other_id, other] : self.stream_by_id) {
    if (other == &stream || other->pending.empty()) continue;
    auto known = op.dependencies.find(other_id);
    uint64_t ordered_through = known == op.dependencies.end() ? 0 : known->second;
    for (const PendingOp& pending : other->pending) {
      if (pending.sequence <= ordered_through) continue;
      for (const Access& mine : op.accesses) {
        for (const Access& theirs : pending.accesses) {
          bool overlap = mine.begin < theirs.end && theirs.begin < mine.end;
          if (overlap && (mine.writes || theirs.writes))
            report_race_locked("race: " + describe(op, stream, mine) + " is not ordered after pending " +
                               describe(pending, *other, theirs));
        }
      }
    }
  }
}

void report_release_races_locked(uintptr_t begin, uintptr_t end, const char* what) {
  for (const auto& [id, stream] : state().stream_by_id) {
    for (const PendingOp& pending : stream->pending) {
      for (const Access& access : pending.accesses) {
        if (access.begin < end && begin < access.end) {
          char text[120];
          std::snprintf(text, sizeof text, "race: %s of [0x%" PRIxPTR ", 0x%" PRIxPTR ") while pending ", what,
                        begin, end);
          report_race_locked(text + describe(pending, *stream, access) + " touches it");
        }
      }
    }
  }
}

}  // namespace simcuda
