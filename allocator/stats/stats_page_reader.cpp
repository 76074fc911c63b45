// fragless-stats' side of the stats page; see stats_page_reader.hpp for the invariants.
#include "stats_page_reader.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <thread>
#include <ctime>
#include <unistd.h>

#include "stats_directory.hpp"
#include "stats_page.hpp"

namespace fragless::stats_reader {
namespace {

std::string read_file_text(int directory_fd, const std::string& name, std::string& error) {
  const int fd = stats_directory::open_file(directory_fd, name, false, error);
  if (fd < 0) return {};
  std::string text;
  char buffer[65536];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return text;
}

}  // namespace

std::unique_ptr<page> page::open(pid_t pid, open_status& status, std::string& error) {
  const int directory_fd = stats_directory::open_directory(false, error);
  if (directory_fd < 0) {
    status = errno == ENOENT ? open_status::missing : open_status::refused;
    if (status == open_status::missing) error = "no fragless process publishes stats (" + stats_directory::path() + " does not exist)";
    return nullptr;
  }
  // Note [Stats pages across PID namespaces]: our namespace's own name for the pid first.
  std::unique_ptr<page> opened;
  if (const std::uint64_t own_namespace = stats_directory::own_pid_namespace(); own_namespace != 0) {
    opened = open_file(directory_fd, stats_directory::namespaced_page_file_name(pid, own_namespace), status, error);
    if (status != open_status::missing) {
      ::close(directory_fd);
      return opened;
    }
  }
  opened = open_file(directory_fd, stats_directory::page_file_name(pid), status, error);
  ::close(directory_fd);
  return opened;
}

std::unique_ptr<page> page::open_file(int directory_fd, const std::string& name, open_status& status,
                                      std::string& error) {
  // Read-write when we may (snapshot requests write into the page), else read-only.
  bool writable = true;
  int fd = stats_directory::open_file(directory_fd, name, true, error);
  if (fd < 0 && errno == EACCES) {
    writable = false;
    fd = stats_directory::open_file(directory_fd, name, false, error);
  }
  if (fd < 0) {
    status = errno == ENOENT ? open_status::missing : open_status::refused;
    return nullptr;
  }
  struct ::stat file_status{};
  ::fstat(fd, &file_status);
  const auto size = static_cast<std::size_t>(file_status.st_size);
  const auto reject = [&](const std::string& why) -> std::unique_ptr<page> {
    status = open_status::bad_format;
    error = name + ": " + why;
    ::close(fd);
    return nullptr;
  };
  if (size < sizeof(stats_page::header)) return reject("truncated stats page (" + std::to_string(size) + " bytes)");
  // Check the header from a private copy before mapping anything.
  stats_page::header header_copy;
  if (::pread(fd, &header_copy, sizeof header_copy, 0) != static_cast<ssize_t>(sizeof header_copy))
    return reject("cannot read the header");
  if (std::memcmp(header_copy.magic, stats_page::magic, sizeof stats_page::magic) != 0)
    return reject("not a fragless stats page (bad magic)");
  if (header_copy.version != stats_page::version)
    return reject("stats page version " + std::to_string(header_copy.version) + ", this fragless-stats reads version " +
                  std::to_string(stats_page::version));
  if (header_copy.layout_hash != stats_page::layout_hash() || header_copy.header_bytes != sizeof(stats_page::header) ||
      header_copy.slot_bytes != sizeof(stats_page::device_slot) ||
      header_copy.device_capacity != stats_page::device_capacity)
    return reject("stats page written by a fragless with a different stats layout");
  if (header_copy.total_bytes != stats_page::total_bytes || size < stats_page::total_bytes)
    return reject("truncated stats page (" + std::to_string(size) + " of " + std::to_string(stats_page::total_bytes) +
                  " bytes)");
  // Note [Stats page validation]: the header's own fields.
  if (header_copy.pid <= 0 || header_copy.pid > 4194304)
    return reject("corrupt stats page (pid " + std::to_string(header_copy.pid) + ")");
  if (name != stats_directory::page_file_name(static_cast<pid_t>(header_copy.pid)) &&
      name != stats_directory::namespaced_page_file_name(static_cast<pid_t>(header_copy.pid), header_copy.pid_namespace))
    return reject("corrupt stats page (it names pid " + std::to_string(header_copy.pid) + ")");
  if (std::memchr(header_copy.command, '\0', sizeof header_copy.command) == nullptr)
    return reject("corrupt stats page (command not terminated)");
  void* mapping =
      ::mmap(nullptr, stats_page::total_bytes, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (mapping == MAP_FAILED) {
    status = open_status::refused;
    error = name + ": mmap: " + std::strerror(errno);
    return nullptr;
  }
  std::unique_ptr<page> opened(new page());
  opened->mapping_ = mapping;
  opened->mapping_bytes_ = stats_page::total_bytes;
  opened->writable_ = writable;
  opened->pid_ = static_cast<pid_t>(header_copy.pid);
  opened->start_time_ = header_copy.start_time_ticks;
  opened->pid_namespace_ = header_copy.pid_namespace;
  opened->command_ = printable_text(header_copy.command);
  opened->file_name_ = name;
  opened->directory_fd_ = ::fcntl(directory_fd, F_DUPFD_CLOEXEC, 0);
  std::string corrupt;
  opened->read_devices(&corrupt);
  if (!corrupt.empty()) {
    status = open_status::bad_format;
    error = name + ": corrupt stats page (" + corrupt + ")";
    return nullptr;
  }
  status = open_status::ok;
  if (!opened->process_running()) {
    status = open_status::stale;
    error = name + ": process " + std::to_string(opened->pid_) + " is gone (stale stats page)";
  }
  return opened;
}

page::~page() {
  if (mapping_ != nullptr) ::munmap(mapping_, mapping_bytes_);
  if (directory_fd_ >= 0) ::close(directory_fd_);
}

bool page::process_running() const {
  return stats_directory::page_owner_state(pid_, start_time_, pid_namespace_) != stats_directory::owner_state::gone;
}

bool page::other_namespace() const {
  return stats_directory::page_owner_state(pid_, start_time_, pid_namespace_) ==
         stats_directory::owner_state::other_namespace;
}

std::string printable_text(std::string_view text) {
  std::string out;
  const auto escape = [&out](unsigned char byte) {
    static constexpr char hex[] = "0123456789abcdef";
    out += "\\x";
    out += hex[byte >> 4];
    out += hex[byte & 15];
  };
  std::size_t i = 0;
  while (i < text.size()) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte == '\\') {
      out += "\\\\";
      ++i;
      continue;
    }
    if (byte < 0x20 || byte == 0x7f) {
      escape(byte);
      ++i;
      continue;
    }
    if (byte < 0x80) {
      out += static_cast<char>(byte);
      ++i;
      continue;
    }
    // A UTF-8 sequence: its length, the smallest code point it may encode (no overlongs).
    std::size_t length = 0;
    std::uint32_t code = 0, minimum = 0;
    if ((byte & 0xe0) == 0xc0) length = 2, code = byte & 0x1fu, minimum = 0x80;
    else if ((byte & 0xf0) == 0xe0) length = 3, code = byte & 0x0fu, minimum = 0x800;
    else if ((byte & 0xf8) == 0xf0) length = 4, code = byte & 0x07u, minimum = 0x10000;
    bool valid = length != 0 && i + length <= text.size();
    for (std::size_t k = 1; valid && k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      valid = (next & 0xc0) == 0x80;
      code = (code << 6) | (next & 0x3fu);
    }
    valid = valid && code >= minimum && code <= 0x10ffff && !(code >= 0xd800 && code <= 0xdfff) &&
            !(code >= 0x80 && code <= 0x9f);  // C1 controls (CSI is U+009B)
    if (!valid) {
      escape(byte);
      ++i;
      continue;
    }
    out.append(text.substr(i, length));
    i += length;
  }
  return out;
}

std::string check_reading(const device_reading& reading) {
  constexpr std::int64_t year_2000_ns = 946684800LL * 1000000000LL;
  constexpr std::int64_t one_day_ns = 86400LL * 1000000000LL;
  constexpr std::int64_t value_limit = std::int64_t{1} << 60;
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  const std::int64_t now_ns = static_cast<std::int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
  const std::string where = "device " + std::to_string(reading.device);
  if (reading.published_ns < year_2000_ns || reading.published_ns > now_ns + one_day_ns)
    return where + ": publish time " + std::to_string(reading.published_ns) + " ns out of range";
  std::int64_t raw[stats_page::value_count];
  std::memcpy(raw, &reading.stats, sizeof raw);
  for (std::size_t i = 0; i < stats_page::value_count; ++i) {
    if (raw[i] >= -1 && raw[i] < value_limit) continue;
    std::string key = "value " + std::to_string(i);
    for (const stat_value& v : flatten(reading.stats)) {
      // Name the field by its (unusual) value: good enough for a message.
      if (v.is_integer && v.integer == raw[i]) {
        key = v.key;
        break;
      }
    }
    return where + ": " + key + " = " + std::to_string(raw[i]) + " out of range";
  }
  return {};
}

std::vector<device_reading> page::read_devices(std::string* corrupt) const {
  std::vector<device_reading> readings;
  for (std::uint32_t device = 0; device < stats_page::device_capacity; ++device) {
    device_reading reading;
    reading.device = static_cast<int>(device);
    const stats_page::device_slot& slot = *stats_page::slot(mapping_, device);
    bool read = stats_page::read_slot(slot, reading.stats, reading.published_ns, 10000);
    // A writer preempted mid-publish holds the slot odd for a while: wait a little before
    // calling a slot that never settles corrupt.
    for (int pause = 0; !read && corrupt != nullptr && pause < 5 && slot.sequence.load(std::memory_order_relaxed) != 0;
         ++pause) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      read = stats_page::read_slot(slot, reading.stats, reading.published_ns, 10000);
    }
    if (read) {
      std::string problem = check_reading(reading);
      if (problem.empty()) {
        readings.push_back(reading);
      } else if (corrupt != nullptr) {
        *corrupt = std::move(problem);
        return {};  // a corrupt page shows nothing
      }
    } else if (slot.sequence.load(std::memory_order_relaxed) != 0 && corrupt != nullptr) {
      // A writer holds a slot odd for nanoseconds; one that stays odd is not a writer.
      *corrupt = "device " + std::to_string(device) + ": slot never settles";
      return {};
    }
  }
  return readings;
}

std::string page::request_snapshot(std::chrono::milliseconds timeout, std::string& error) {
  if (!writable_) {
    error = "the stats page of process " + std::to_string(pid_) + " is read-only for us; cannot request a snapshot";
    return {};
  }
  auto& header = *static_cast<stats_page::header*>(mapping_);
  static std::atomic<unsigned> counter{0};
  const std::string name = "snapshot-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".json";
  ::unlinkat(directory_fd_, name.c_str(), 0);  // a leftover of ours from an interrupted run
  std::memset(header.request_name, 0, sizeof header.request_name);
  std::memcpy(header.request_name, name.data(), name.size());
  const std::uint64_t sequence = header.request_sequence.fetch_add(1, std::memory_order_acq_rel) + 1;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (header.response_sequence.load(std::memory_order_acquire) < sequence) {
    if (std::chrono::steady_clock::now() > deadline) {
      error = "process " + std::to_string(pid_) + " did not answer the snapshot request within " +
              std::to_string(timeout.count()) + " ms (it answers from its allocator's slow path or request thread)";
      return {};
    }
    if (!process_running()) {
      error = "process " + std::to_string(pid_) + " exited";
      return {};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const int status = header.response_status.load(std::memory_order_relaxed);
  if (status != 0) {
    error = "process " + std::to_string(pid_) + " could not write the snapshot: " + std::strerror(status);
    return {};
  }
  std::string text = read_file_text(directory_fd_, name, error);
  ::unlinkat(directory_fd_, name.c_str(), 0);
  return text;
}

std::vector<listing_entry> list_pages(bool remove_stale, std::string& error) {
  std::vector<listing_entry> entries;
  const int directory_fd = stats_directory::open_directory(false, error);
  if (directory_fd < 0) {
    if (errno == ENOENT) error.clear();  // nobody has published yet: an empty list
    return entries;
  }
  const int scan_fd = ::fcntl(directory_fd, F_DUPFD_CLOEXEC, 0);
  DIR* directory = ::fdopendir(scan_fd);
  if (directory == nullptr) {
    ::close(scan_fd);
    ::close(directory_fd);
    error = "cannot list " + stats_directory::path();
    return entries;
  }
  while (const dirent* item = ::readdir(directory)) {
    const std::string name = item->d_name;
    if (name.size() <= 6 || name.compare(name.size() - 6, 6, ".stats") != 0) continue;
    listing_entry entry;
    entry.file_name = name;
    entry.opened = page::open_file(directory_fd, name, entry.status, entry.error);
    // Only a provably gone owner makes a page stale (Note [Stats pages across PID namespaces]).
    if (entry.status == open_status::stale && remove_stale) {
      ::unlinkat(directory_fd, name.c_str(), 0);
      continue;
    }
    entries.push_back(std::move(entry));
  }
  ::closedir(directory);
  ::close(directory_fd);
  std::sort(entries.begin(), entries.end(), [](const listing_entry& a, const listing_entry& b) {
    const long pa = std::strtol(a.file_name.c_str(), nullptr, 10), pb = std::strtol(b.file_name.c_str(), nullptr, 10);
    return pa != pb ? pa < pb : a.file_name < b.file_name;
  });
  return entries;
}

}  // namespace fragless::stats_reader
