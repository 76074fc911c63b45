// replayer: drives one trace through one replay_allocator and measures it.
// Invariant: every block the allocator returns is checked against the live set
// (live_block_checker); an overlap stops the replay with status "overlap". Memory figures
// come from the first repetition, host time is the median over all repetitions, and the
// clock runs only around allocate/deallocate calls. See Note [Replay timing] and
// Note [Steady state].
#pragma once

#include "cost/cost_table.hpp"
#include "call_log.hpp"
#include "device_counters.hpp"
#include "replay_allocator.hpp"
#include "traces/trace.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace fragless::bench {

// Note [Replay timing]
// Each allocate/deallocate call is timed on its own with steady_clock and the times are
// summed; per-operation time is that sum over the number of calls. On simcuda the time it
// spent emulating the priced device calls inside a call is taken out (Note [Host time
// without emulation] in device_counters.hpp) and reported apart. Queries made for the
// measurements (reserved bytes, simcuda counters, the overlap checker) sit outside the
// timed region, so every peer pays the same, zero, measurement overhead. Repetition 0
// starts from a fresh process; later repetitions start with the cache the earlier ones
// left (only what was still live is freed between them), so they measure a warm
// allocator, as a real training loop would.

// Note [Steady state]
// A training loop repeats one step. The benchmark treats the whole trace as that step:
// with at least two repetitions, the device calls (allocations, frees, maps, unmaps) the
// allocator makes during the LAST repetition are its steady-state calls per step. An
// allocator that keeps what the step needs cached makes none; one that gives memory back
// or moves pages between uses pays for it again every step. How long the warm-up lasted is
// the last repetition that made a device call (1 when only the first did; the number of
// repetitions when the last one still does): PyTorch's caching allocator stops after its
// first pass, an allocator that settles its layout over a few steps later. Each
// repetition's calls and host time are kept too (calls_by_pass, host_ns_by_pass): the
// median host time is a different repetition for an allocator that settles later, and a
// run with fewer repetitions would have stopped in one of them.

// Note [Peak over the run]
// Peak reserved bytes are taken over every repetition, not only the first: an allocator
// that kept reserved memory low on the first pass and let it grow in later ones (to stop
// moving pages, say) must show the growth. The timeline plot and the device-call totals
// are the first repetition's; calls per step are the last one's (Note [Steady state]).
// In the warm repetitions reserved bytes are read only when the device memory in use may
// have changed since the last read (Note [Memory generation] in device_counters.hpp: every
// allocator's reserved bytes grow only through a device call): reading an allocator's stats after every operation disturbs the caches the
// timed operations run in, and did double fragless's measured ns/op when we tried it.

struct replay_options {
  int repetitions = 3;
  std::size_t max_events = 0;       // 0 = all; otherwise replay a prefix (reported)
  std::size_t timeline_points = 600;
  // Note [Host work]: busy host time spent before each event, outside the timed calls.
  std::uint64_t host_work_ns = 0;
  // Note [Call log]: where each event's device calls are written (null: nowhere).
  call_log* log = nullptr;
};

struct timeline_point {
  std::size_t event = 0;
  std::uint64_t live_bytes = 0;
  std::uint64_t reserved_bytes = 0;
};

struct replay_outcome {
  std::string status = "ok";  // ok | overlap: ... | error: ...
  std::size_t events_replayed = 0;
  std::uint64_t peak_reserved_bytes = 0;
  std::uint64_t reserved_minus_allocated_at_peak_bytes = 0;
  std::uint64_t peak_live_bytes = 0;
  // simcuda's own account, or cudaMemGetInfo's total - free (Note [Counting device calls])
  std::uint64_t device_used_peak_bytes = 0;
  std::uint64_t ooms = 0;
  std::string first_failure;  // the allocator's message for the first failed allocation
  double host_ns_per_op = 0.0;
  // Note [Host time without emulation]: simcuda's time emulating the priced device calls,
  // per operation, in the repetition host_ns_per_op is taken from; not part of it. -1 where
  // nothing was timed (not simcuda).
  double emulation_ns_per_op = -1.0;
  // The longest single allocation or free over all repetitions: a stall the median hides.
  std::uint64_t longest_op_ns = 0;
  device_call_counts calls;
  // Note [Steady state]: device calls of the last repetition; -1 with one repetition.
  std::int64_t steady_calls = -1;
  // Note [Steady state]: the last repetition (1-based) that made a device call, 0 if none
  // did; -1 with one repetition.
  std::int64_t last_calling_pass = -1;
  // Note [Steady state]: per repetition, in order: its device calls (empty without
  // counters) and its host ns per operation (the figure host_ns_per_op is the median of).
  std::vector<std::uint64_t> calls_by_pass;
  std::vector<double> host_ns_by_pass;
  // Note [Cost model]: what the first and the last repetition did, priced by the parent.
  pass_activity first_pass;
  pass_activity steady_pass;  // all zero with one repetition
  bool counters_available = false;
  std::vector<timeline_point> timeline;
};

replay_outcome replay_trace(const traces::trace& t, replay_allocator& allocator,
                            const std::vector<stream_handle>& streams, const replay_options& options,
                            const device_counters& counters);

}  // namespace fragless::bench
