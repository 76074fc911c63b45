// snapshot_reader: PyTorch memory snapshots (torch.cuda.memory._dump_snapshot() pickles)
// to a trace, with the seeding and "native as recorded" rules of Note [Snapshot replay].
// Invariant: reads through the data-only pickle reader; never runs code from the input.
#pragma once

#include "pickle_reader.hpp"
#include "trace.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace fragless::traces {

// Note [Snapshot replay]
// - One device is replayed: the one with the most `alloc` events (device 0 when none has
//   any). Events of other devices are counted in the notes, not replayed.
// - Seeds: blocks live before recording began. A block is seeded when the first trace event
//   at its address is a free, or when it is active in `segments` at dump time and no
//   allocation of the trace at that address is live at the end. Seeds are allocated first,
//   in address order.
// - A block is freed at `free_completed` (the moment the real allocator could reuse it; for
//   blocks used on several streams that is after their events completed). Traces from older
//   PyTorch versions that have no `free_completed` are freed at `free_requested` / `free`.
// - Consistency: live bytes at the start + allocated - freed must equal the live
//   (active) requested bytes in `segments`; the result is kept in snapshot_facts.
// - `segment_*`, `snapshot` and `oom` events are not replayed; `segment_*` rebuild the
//   native reserved curve backwards from the `segments` total at dump time.

struct snapshot_facts {
  int device = 0;
  std::uint64_t seed_bytes = 0;
  std::uint64_t dump_live_bytes = 0;      // active requested bytes in `segments`
  std::uint64_t replay_end_live_bytes = 0;
  bool seeding_consistent = false;
  std::uint64_t dump_reserved_bytes = 0;  // sum of segment total_size
  std::uint64_t other_device_events = 0;
};

// Reads a snapshot from bytes already in memory; `name` is used in error messages.
// Throws pickle_error (bad pickle) or trace_error (bad structure), messages prefixed with name.
trace read_snapshot(std::string_view bytes, const std::string& name, snapshot_facts* facts = nullptr);

}  // namespace fragless::traces
