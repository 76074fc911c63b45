// trace: validation and small queries over the common trace form.
// Invariant: validate_trace accepts exactly the traces a replayer can run without guessing.
#include "trace.hpp"

#include <unordered_map>

namespace fragless::traces {

void validate_trace(const trace& t) {
  std::unordered_map<std::uint64_t, std::uint64_t> live;  // block id -> size
  live.reserve(t.events.size() / 2 + 1);
  if (t.seeded_block_count > t.events.size()) throw trace_error("more seeded blocks than events");
  if (t.stream_count == 0) throw trace_error("a trace needs at least one stream");
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    const trace_event& e = t.events[i];
    const std::string where = "event " + std::to_string(i) + ": ";
    if (e.stream_index >= t.stream_count) throw trace_error(where + "stream index out of range");
    if (e.op == trace_op::alloc) {
      if (e.size_bytes == 0 || e.size_bytes > max_block_bytes) {
        throw trace_error(where + "absurd allocation size " + std::to_string(e.size_bytes));
      }
      if (!live.emplace(e.block_id, e.size_bytes).second) {
        throw trace_error(where + "block " + std::to_string(e.block_id) + " allocated twice");
      }
    } else {
      if (i < t.seeded_block_count) throw trace_error(where + "a seed must be an allocation");
      auto found = live.find(e.block_id);
      if (found == live.end()) {
        throw trace_error(where + "free of unknown block " + std::to_string(e.block_id));
      }
      live.erase(found);
    }
  }
  for (const recorded_point& p : t.recorded_reserved) {
    if (p.after_event >= t.events.size() && !t.events.empty()) {
      throw trace_error("recorded reserved point after event " + std::to_string(p.after_event) +
                        " is past the end");
    }
  }
}

std::uint64_t live_bytes_at_end(const trace& t) {
  std::unordered_map<std::uint64_t, std::uint64_t> live;
  std::uint64_t bytes = 0;
  for (const trace_event& e : t.events) {
    if (e.op == trace_op::alloc) {
      live[e.block_id] = e.size_bytes;
      bytes += e.size_bytes;
    } else if (auto found = live.find(e.block_id); found != live.end()) {
      bytes -= found->second;
      live.erase(found);
    }
  }
  return bytes;
}

}  // namespace fragless::traces
