// Reading other processes' stats pages (the fragless-stats side). Invariants: a page is
// interpreted only after its file passed stats_directory::open_file's checks and its
// magic, version, layout hash and sizes match this build; every header field and every
// published value is range-checked before use (Note [Stats page validation]); nothing is
// read beyond the validated file size; every failure is one line of text, never an
// exception; a page is reported stale (and may be removed) only when its owner is provably
// gone (Note [Stats pages across PID namespaces] in stats_directory.hpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

#include "fragless/stats.hpp"

namespace fragless::stats_reader {

enum class open_status {
  ok,
  missing,     // no page file for that pid
  refused,     // symlink, not a regular file, not ours, wrong mode
  bad_format,  // wrong magic, version, layout or size, or corrupt (message says which)
  stale,       // the process that wrote it is provably gone
};

// Note [Stats page validation]
// A page is shared memory another process (or anything able to write our files) wrote, so
// nothing in it is trusted: the pid must be 1..4194304 and match the file name, the command
// must be NUL-terminated, a published slot's time must lie between 2000-01-01 and one day
// from now, and every stored value must lie in [-1, 2^60) (bytes, counts and nanoseconds are
// never negative; -1 is "none", as max_split_size uses it). A page failing any check is
// reported as corrupt, never shown as numbers. The command is shown through
// cli sanitising (control characters and invalid UTF-8 escaped).

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
  // The process name, made printable (printable_text): safe for a terminal and for JSON.
  const std::string& command() const noexcept { return command_; }
  std::uint64_t start_time() const noexcept { return start_time_; }
  std::uint64_t pid_namespace() const noexcept { return pid_namespace_; }
  const std::string& file_name() const noexcept { return file_name_; }
  // False only when the owner is provably gone (Note [Stats pages across PID namespaces]).
  bool process_running() const;
  // The page was written in another (or an unknown) PID namespace: its pid is not ours.
  bool other_namespace() const;

  // Untorn copies of every published device slot, device order. With `corrupt` given, the
  // first slot failing Note [Stats page validation] is described there and nothing is
  // returned; without it, failing slots are left out.
  std::vector<device_reading> read_devices(std::string* corrupt = nullptr) const;

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
  std::uint64_t pid_namespace_ = 0;
  std::string command_;
  std::string file_name_;
};

struct listing_entry {
  std::string file_name;
  open_status status = open_status::ok;
  std::string error;
  std::unique_ptr<page> opened;  // when status == ok
};

// Every "*.stats" file in the stats directory, opened (pid order). With
// remove_stale, pages of processes that are provably gone are deleted (and not listed).
std::vector<listing_entry> list_pages(bool remove_stale, std::string& error);

// Untrusted text made safe to print and to put in JSON: valid UTF-8 without control
// characters is kept; control characters (C0, DEL, C1) and bytes that are not valid UTF-8
// become "\xNN" (a backslash becomes "\\"), so no escape sequence reaches a terminal.
std::string printable_text(std::string_view text);

// Note [Stats page validation]: "" when `reading` is plausible, else what is wrong.
std::string check_reading(const device_reading& reading);

}  // namespace fragless::stats_reader
