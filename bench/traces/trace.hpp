// trace: the one in-memory form every input (PyTorch snapshot, RMM log, lifetime CSV, our
// text format, built-in workloads) is converted to before replay.
//
// Invariant (checked by validate_trace): block ids are allocated before they are freed,
// never allocated twice while live, freed at most once per allocation; sizes are in
// (0, max_block_bytes]; streams are < stream_count. Seeded blocks (live before the trace
// window began) are the first `seeded_block_count` events, all allocations.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace fragless::traces {

// Largest single block a trace may ask for: 1 PiB. Anything larger is a corrupt input.
inline constexpr std::uint64_t max_block_bytes = std::uint64_t{1} << 50;

enum class trace_op : std::uint8_t { alloc, free };

struct trace_event {
  trace_op op = trace_op::alloc;
  std::uint32_t stream_index = 0;  // dense index into the trace's streams
  std::uint64_t block_id = 0;      // names the block; reused ids mean a new block
  std::uint64_t size_bytes = 0;    // requested bytes (a free repeats its allocation's size)
};

// One point of the native allocator's recorded reserved-bytes curve: after replay event
// `after_event` (index into events; seeds included) the recorded reserved bytes were `bytes`.
struct recorded_point {
  std::size_t after_event = 0;
  std::uint64_t bytes = 0;
};

struct trace {
  std::string name;            // shown in reports (file stem or workload spec)
  std::string source_format;   // "pytorch-snapshot", "rmm-csv", "lifetime-csv", "fragless-text", "builtin"
  std::vector<trace_event> events;
  std::size_t seeded_block_count = 0;
  std::uint32_t stream_count = 1;
  std::vector<std::string> notes;  // facts the reader wants in the report (skipped events, ...)

  // "PyTorch native as recorded": the real allocator's reserved bytes over the window,
  // rebuilt from segment events. Empty when the source has no such information.
  std::vector<recorded_point> recorded_reserved;
  std::uint64_t recorded_segment_allocs = 0;  // segment_alloc / segment_map events in the window
  std::uint64_t recorded_segment_frees = 0;   // segment_free / segment_unmap events in the window
  // Wall time between the window's first and last event, from snapshot timestamps
  // (time_us); 0 when the source has none. Not kept by the text format.
  std::uint64_t recorded_wall_ns = 0;
};

class trace_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// Checks the invariant above. Throws trace_error "event N: ..." on the first violation.
void validate_trace(const trace& t);

// Live bytes (requested) at the end of the trace.
std::uint64_t live_bytes_at_end(const trace& t);


}  // namespace fragless::traces
