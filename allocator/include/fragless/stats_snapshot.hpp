// The memory snapshot model: every segment the allocator holds, with its blocks, as plain
// structs the allocator fills (under its locks) and tools read. Writers: fragless JSON
// ("fragless.snapshot/1", Note [Snapshot JSON]) and a PyTorch-compatible snapshot pickle
// that torch's memory_viz opens. The walker stats_from_snapshot() computes every stat a
// snapshot implies, for consistency checks against the live counters.
// Invariants of a well-formed snapshot (check_snapshot() verifies them): within a segment,
// blocks are address-ordered, contiguous, and exactly cover [address, address + size_bytes);
// segments of one device do not overlap.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fragless/stats.hpp"

namespace fragless {

// PyTorch's block states: "active_allocated", "active_pending_free", "inactive".
enum class block_state : std::uint8_t {
  allocated,     // handed out, not freed by the user
  pending_free,  // freed by the user, stream uses still pending (still "active")
  free,          // cached, reusable
};
std::string_view to_pytorch_state(block_state state) noexcept;

struct snapshot_block {
  std::uint64_t address = 0;
  std::uint64_t size_bytes = 0;
  std::uint64_t requested_bytes = 0;  // the user's size; 0 for free blocks
  block_state state = block_state::free;
  friend bool operator==(const snapshot_block&, const snapshot_block&) = default;
};

struct snapshot_segment {
  int device = 0;
  std::uint64_t address = 0;
  std::uint64_t size_bytes = 0;
  std::uint64_t stream = 0;     // the stream the segment was created for (0: default stream)
  pool_kind pool = pool_large;  // pool_small or pool_large
  bool is_expandable = false;   // a range whose pages are mapped and unmapped (vmm backend)
  std::vector<snapshot_block> blocks;
  std::uint64_t private_pool = 0;  // the private pool holding it (fragless::pool_id); 0: the device's cache
  friend bool operator==(const snapshot_segment&, const snapshot_segment&) = default;
};

struct memory_snapshot {
  std::vector<snapshot_segment> segments;
  int device_count = 1;  // devices covered (device_traces has this many lists)
  // The allocator's limit for splitting (oversize threshold); -1 for unlimited.
  std::int64_t max_split_size = -1;
  // Settings in force, "key:value,..." (FRAGLESS_CONF syntax), informational.
  std::string settings;
  friend bool operator==(const memory_snapshot&, const memory_snapshot&) = default;
};

// Every well-formedness problem of `snapshot` (empty when well formed), one line each.
std::vector<std::string> check_snapshot(const memory_snapshot& snapshot);

// Note [Stats from snapshot]
// What a snapshot implies for one device's *current* values (peaks and totals are
// history, which a snapshot does not have; they are left equal to current / allocated =
// current, freed = 0):
//   allocation / allocated_bytes / requested_bytes  <- allocated blocks
//   active / active_bytes                           <- allocated + pending_free blocks
//   segment / reserved_bytes                        <- segments
//   inactive_split / inactive_split_bytes           <- free blocks of segments with > 1 block
//   oversize_allocations / oversize_segments        <- allocated blocks / segments with
//                                                      size >= max_split_size (when >= 0)
//   largest_free_block_bytes                        <- largest free block
//   max_split_size                                  <- the snapshot's
// Pools follow the segment's pool. Counters (retries, map calls, ...) stay 0.
device_stats stats_from_snapshot(const memory_snapshot& snapshot, int device);

// Differences between the current values the walker computed and live stats, one line per
// differing flat key ("allocated_bytes.all.current: snapshot 1024, live 2048"). Compares
// current values of groups and singles, and largest_free_block_bytes when compare_largest_free.
std::vector<std::string> compare_current(const device_stats& from_snapshot, const device_stats& live,
                                         bool compare_largest_free = true);

// Note [Snapshot JSON]
// {
//   "schema": "fragless.snapshot/1",
//   "device_count": 1, "max_split_size": -1, "settings": "backend:vmm,...",
//   "segments": [
//     {"device": 0, "address": 139637976727552, "size": 2097152, "stream": 0,
//      "pool": "small" | "large", "expandable": false, "private_pool": N (only when not 0),
//      "blocks": [{"address": ..., "size": ..., "requested_size": ...,
//                  "state": "allocated" | "pending_free" | "free"}, ...]}, ...]
// }
// Addresses and sizes are JSON integers (exact up to 2^63). Readers reject another schema
// and ignore unknown keys.
inline constexpr std::string_view snapshot_json_schema = "fragless.snapshot/1";
std::string to_json(const memory_snapshot& snapshot);
bool snapshot_from_json(std::string_view json, memory_snapshot& snapshot, std::string& error);

// Note [Snapshot pickle]
// A pickle (protocol 2, only dicts, lists, tuples, ints, strings, bools, None) shaped like
// torch.cuda.memory._snapshot(): {"segments": [{"device", "address", "total_size",
// "allocated_size", "active_size", "requested_size", "stream", "segment_type",
// "segment_pool_id": (0, private pool id), "is_expandable", "frames": [], "blocks": [{"address", "size",
// "requested_size", "state", "frames": []}]}], "device_traces": [[] per device],
// "allocator_settings": {}}. PyTorch's memory_viz and pickle.load open it.
std::string to_pytorch_pickle(const memory_snapshot& snapshot);

}  // namespace fragless
