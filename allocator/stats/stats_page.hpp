// The shared-memory stats page: one file per process in the per-user stats directory,
// written by stats_publisher, read by fragless-stats. Layout below; see
// Note [Stats page seqlock] for how readers get untorn copies without ever blocking the writer.
// Invariants: a page whose magic, version, layout hash or sizes differ from this build's
// is rejected, never interpreted; readers only touch bytes below the file size they
// validated.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fragless/stats.hpp"

namespace fragless::stats_page {

// Note [Stats page seqlock]
// Each device slot has a sequence counter. The writer makes it odd (one CAS, which also
// keeps two writers of one slot apart), stores every value with relaxed atomic stores,
// then makes it even with a release store. A reader loads the sequence (acquire), retries
// while it is odd, copies the values with relaxed loads, issues an acquire fence and
// re-reads the sequence; equal values mean the copy is untorn. The writer never waits for
// readers and makes no system call (the page is mmap'ed once at start-up).
//
// Note [Stats page requests]
// fragless-stats asks for a full snapshot by writing a file name (a plain name, no '/')
// into request_name and then incrementing request_sequence. The process, in
// poll_requests(), sees request_sequence != response_sequence, creates that file in the
// stats directory (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600), writes the snapshot JSON, then
// stores response_status (0 or an errno) and response_sequence = request_sequence.

inline constexpr char magic[8] = {'F', 'R', 'A', 'G', 'S', 'T', 'A', 'T'};
inline constexpr std::uint32_t version = 2;  // 2: pid_namespace (Note [Stats pages across PID namespaces])
inline constexpr std::uint32_t device_capacity = 64;
inline constexpr std::size_t value_count = sizeof(device_stats) / sizeof(std::int64_t);
static_assert(sizeof(device_stats) == value_count * sizeof(std::int64_t), "device_stats must be int64 values only");
inline constexpr std::size_t command_bytes = 64;
inline constexpr std::size_t request_name_bytes = 128;

struct device_slot {
  std::atomic<std::uint64_t> sequence;       // Note [Stats page seqlock]; 0: never published
  std::atomic<std::int64_t> published_ns;    // CLOCK_REALTIME of the last publish
  std::atomic<std::int64_t> values[value_count];  // device_stats, member order
};

struct header {
  char magic[8];
  std::uint32_t version;
  std::uint32_t header_bytes;          // sizeof(header)
  std::uint64_t total_bytes;           // the file size
  std::uint64_t layout_hash;           // FNV-1a of every flat stats key (field list identity)
  std::uint32_t device_capacity;
  std::uint32_t slot_bytes;            // sizeof(device_slot)
  std::int64_t pid;
  std::uint64_t start_time_ticks;      // /proc/<pid>/stat field 22: tells PID reuse apart
  std::uint64_t pid_namespace;         // inode of /proc/self/ns/pid; 0: unknown
  char command[command_bytes];         // NUL-terminated
  std::atomic<std::uint64_t> request_sequence;   // Note [Stats page requests]
  std::atomic<std::uint64_t> response_sequence;
  std::atomic<std::int32_t> response_status;
  std::uint32_t reserved0;
  char request_name[request_name_bytes];
};

inline constexpr std::size_t total_bytes = sizeof(header) + device_capacity * sizeof(device_slot);

// FNV-1a over the flat keys of device_stats, in order.
std::uint64_t layout_hash();

// The slot of `device` in a mapped page of total_bytes.
inline device_slot* slot(void* page, std::uint32_t device) {
  return reinterpret_cast<device_slot*>(static_cast<char*>(page) + sizeof(header) + device * sizeof(device_slot));
}
inline const device_slot* slot(const void* page, std::uint32_t device) {
  return reinterpret_cast<const device_slot*>(static_cast<const char*>(page) + sizeof(header) +
                                              device * sizeof(device_slot));
}

// Hot path: one seqlock write of `stats` into `s`. No system call, no allocation.
void write_slot(device_slot& s, const device_stats& stats) noexcept;
// One untorn read; false when the slot was never published or stayed busy for
// max_attempts tries.
bool read_slot(const device_slot& s, device_stats& stats, std::int64_t& published_ns,
               int max_attempts = 100000) noexcept;

// A plain file name fit for request_name: 1..127 bytes of [A-Za-z0-9._-], not starting
// with '.'.
bool is_safe_file_name(std::string_view name) noexcept;

}  // namespace fragless::stats_page
