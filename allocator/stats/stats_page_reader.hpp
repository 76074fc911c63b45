// Reading other processes' stats pages (the fragless-stats side). Invariants: a page is
// interpreted only after its file passed stats_directory::open_file's checks and its
// magic, version, layout hash and sizes match this build; nothing is read beyond the
// validated file size; every failure is one line of text, never an exception.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <sys/types.h>
#include <vector>

#include "fragless/stats.hpp"

namespace fragless::stats_reader {

enum class open_status {
  ok,
  missing,     // no page file for that pid
  refused,     // symlink, not a regular file, not ours, wrong mode
  bad_format,  // wrong magic, version, layout or size (message says which)
  stale,       // the process that wrote it is gone
};

struct device_reading {
  int device = 0;
  device_stats stats{};
  std::int64_t published_ns = 0;  // CLOCK_REALTIME of the writer's last publish
};

class page {
 public:
  // Opens `<pid>.stats` in the stats directory.
  static std::unique_ptr<page> open(pid_t pid, open_status& status, std::string& error);
  // Opens a page file by name in an already opened stats directory.
  static std::unique_ptr<page> open_file(int directory_fd, const std::string& name, open_status& status,
                                         std::string& error);
  ~page();
  page(const page&) = delete;
  page& operator=(const page&) = delete;

  pid_t pid() const noexcept { return pid_; }
  const std::string& command() const noexcept { return command_; }
  std::uint64_t start_time() const noexcept { return start_time_; }
  bool process_running() const;

  // Untorn copies of every published device slot, device order.
  std::vector<device_reading> read_devices() const;

  // Asks the process for a snapshot (Note [Stats page requests]) and waits up to
  // `timeout` for it; returns the snapshot JSON text or "" with `error`.
  std::string request_snapshot(std::chrono::milliseconds timeout, std::string& error);

 private:
  page() = default;
  int directory_fd_ = -1;
  void* mapping_ = nullptr;
  std::size_t mapping_bytes_ = 0;
  bool writable_ = false;
  pid_t pid_ = 0;
  std::uint64_t start_time_ = 0;
  std::string command_;
};

struct listing_entry {
  std::string file_name;
  open_status status = open_status::ok;
  std::string error;
  std::unique_ptr<page> opened;  // when status == ok
};

// Every "*.stats" file in the stats directory, opened (pid order). With
// remove_stale, pages of processes that are gone are deleted (and not listed).
std::vector<listing_entry> list_pages(bool remove_stale, std::string& error);

}  // namespace fragless::stats_reader
