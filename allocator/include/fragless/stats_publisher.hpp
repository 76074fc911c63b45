// Live stats publishing: each process publishes its per-device stats in a small
// shared-memory page (one file in the per-user stats directory) that fragless-stats
// reads, and answers fragless-stats' snapshot requests. Plain C++ and POSIX.
// Invariants: publish() makes no system call and never blocks on readers; nothing here
// throws or aborts (failure to publish = a warning and a disabled publisher); the page
// file is removed when the publisher is destroyed and at process exit.
//
// How the allocator uses it (Note [Publishing stats]):
//   1. At start-up, when options.publish_stats: publisher = stats_publisher::create(warn).
//      Keep it for the process lifetime (it may be null: publishing unavailable).
//   2. After a stats change, or at most every N operations, call
//      publisher->publish(device, stats_copy) from a place that holds the device's stats
//      lock or a copy of the stats (cost: ~170 relaxed stores, no syscall, no allocation).
//   3. From a slow path (allocation miss, empty_cache) or a background thread (e.g. every
//      100 ms), call publisher->poll_requests(take_snapshot): it returns at once unless
//      fragless-stats asked for a snapshot, and then calls take_snapshot() (on the calling
//      thread, outside any allocator lock the callback itself takes) and writes the file.
//      A background thread is the simplest: start_request_thread(take_snapshot, 100ms).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <sys/types.h>

#include "fragless/stats.hpp"
#include "fragless/stats_snapshot.hpp"

namespace fragless {

class stats_publisher {
 public:
  using warning_callback = std::function<void(std::string_view message)>;
  using snapshot_callback = std::function<memory_snapshot()>;

  // Creates this process's page file; nullptr (after one warning) when the directory or
  // file cannot be created safely. A stale file of a dead process with our pid is replaced;
  // anything else in place of our file is refused.
  static std::unique_ptr<stats_publisher> create(const warning_callback& warn = {}) noexcept;
  ~stats_publisher();
  stats_publisher(const stats_publisher&) = delete;
  stats_publisher& operator=(const stats_publisher&) = delete;

  // Hot path. Devices >= 64 are not published. After fork(), a child's publisher is
  // inert (it does not write into its parent's page).
  void publish(int device, const device_stats& stats) noexcept;

  // Answers a pending snapshot request, if any; returns true when it wrote one.
  bool poll_requests(const snapshot_callback& take_snapshot) noexcept;

  // A thread calling poll_requests every `interval` until the publisher is destroyed.
  void start_request_thread(snapshot_callback take_snapshot,
                            std::chrono::milliseconds interval = std::chrono::milliseconds(100));

  // The page file's full path (for messages and tests).
  const std::string& file_path() const noexcept;

 private:
  struct state;
  explicit stats_publisher(std::unique_ptr<state> s) noexcept;
  std::unique_ptr<state> state_;
};

}  // namespace fragless
