// Live stats publishing: each process publishes its per-device stats in a small
// shared-memory page (one file in the per-user stats directory) that fragless-stats
// reads, and answers fragless-stats' snapshot requests. Plain C++ and POSIX.
// Invariants: publish() makes no system call and never blocks on readers; nothing here
// throws or aborts (failure to publish = a warning and a disabled publisher); the page
// file is removed when the publisher is destroyed and at process exit.
//
// How the allocator uses it (Note [Publishing stats]) -- the simplest wiring costs the
// allocator nothing on its hot paths:
//   1. Once, when options.publish_stats (FRAGLESS_CONF publish_stats, default True):
//        publisher = stats_publisher::create(warn);   // may be null: publishing unavailable
//      and keep it for the process lifetime.
//   2. publisher->start_background_thread(refresh, take_snapshot, 100ms): every interval
//      the thread calls refresh(*publisher), which copies each device's stats (under the
//      allocator's own locks, as get_device_stats does) and calls publish(device, copy);
//      then it answers a pending snapshot request with take_snapshot() (a memory_snapshot
//      of every device; called on that thread, never under a publisher lock).
//   Alternatively, call publish() right after stats change (cost: ~170 relaxed stores, no
//   system call, no allocation) and poll_requests() from a slow path.
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

  // A thread that, every `interval` until the publisher is destroyed, calls refresh(*this)
  // (when set) and then poll_requests(take_snapshot). Exceptions from the callbacks are
  // swallowed. Starts at most one thread.
  using refresh_callback = std::function<void(stats_publisher&)>;
  void start_background_thread(refresh_callback refresh, snapshot_callback take_snapshot,
                               std::chrono::milliseconds interval = std::chrono::milliseconds(100));
  // start_background_thread without refresh.
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
