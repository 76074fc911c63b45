// The per-user stats directory; see stats_directory.hpp for the invariants it keeps.
#include "stats_directory.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace fragless::stats_directory {
namespace {

std::string errno_text(int error_number) { return std::strerror(error_number); }

bool private_to_us(const struct stat& status) {
  return status.st_uid == ::geteuid() && (status.st_mode & 077) == 0;
}

// `fd` when it is of file type `type` (S_IFDIR, S_IFREG) and private to us; otherwise it is
// closed, `error` says which check failed, and the answer is -1.
int keep_if_private(int fd, mode_t type, const std::string& wrong_type, const std::string& not_private,
                    std::string& error) {
  struct stat status{};
  const bool right_type = ::fstat(fd, &status) == 0 && (status.st_mode & S_IFMT) == type;
  if (right_type && private_to_us(status)) return fd;
  error = right_type ? not_private : wrong_type;
  ::close(fd);
  return -1;
}

}  // namespace

std::string path() {
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  if (runtime != nullptr && runtime[0] == '/') return std::string(runtime) + "/fragless";
  return "/dev/shm/fragless-" + std::to_string(::geteuid());
}

int open_directory(bool create, std::string& error) {
  const std::string directory = path();
  bool created = false;
  if (create) {
    if (::mkdir(directory.c_str(), 0700) == 0) {
      created = true;
    } else if (errno != EEXIST) {
      error = "cannot create " + directory + ": " + errno_text(errno);
      return -1;
    }
  }
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int saved = errno;
    error = directory + ": " + (saved == ELOOP || saved == ENOTDIR ? "not a directory (symlink?)" : errno_text(saved));
    return -1;
  }
  if (created) ::fchmod(fd, 0700);  // mkdir's mode went through the umask
  return keep_if_private(fd, S_IFDIR, directory + ": not a directory",
                         directory + ": refused, it must be owned by uid " + std::to_string(::geteuid()) +
                             " with no group/other access (mode 0700)",
                         error);
}

int create_file(int directory_fd, const std::string& name, std::string& error) {
  const int fd = ::openat(directory_fd, name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    error = name + ": " + (errno == EEXIST ? std::string("already exists (refused)") : errno_text(errno));
    return -1;
  }
  if (::fchmod(fd, 0600) != 0) {
    error = name + ": fchmod: " + errno_text(errno);
    ::close(fd);
    ::unlinkat(directory_fd, name.c_str(), 0);
    return -1;
  }
  return fd;
}

int open_file(int directory_fd, const std::string& name, bool writable, std::string& error) {
  const int fd = ::openat(directory_fd, name.c_str(), (writable ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int saved = errno;
    error = name + ": " + (saved == ELOOP ? std::string("is a symlink (refused)") : errno_text(saved));
    return -1;
  }
  return keep_if_private(fd, S_IFREG, name + ": not a regular file (refused)",
                         name + ": refused, not owned by us with mode 0600", error);
}

std::string page_file_name(pid_t pid) { return std::to_string(pid) + ".stats"; }

std::uint64_t process_start_time(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!in || !std::getline(in, text)) return 0;
  const std::size_t close_paren = text.rfind(')');
  if (close_paren == std::string::npos) return 0;
  std::istringstream fields(text.substr(close_paren + 1));
  std::string field;
  // After ")": field 3 (state) is index 0, so field 22 (starttime) is index 19.
  for (int index = 0; index <= 19; ++index)
    if (!(fields >> field)) return 0;
  return std::strtoull(field.c_str(), nullptr, 10);
}

std::string namespaced_page_file_name(pid_t pid, std::uint64_t pid_namespace) {
  return std::to_string(pid) + "-" + std::to_string(pid_namespace) + ".stats";
}

std::uint64_t own_pid_namespace() {
  struct stat status{};
  if (::stat("/proc/self/ns/pid", &status) != 0) return 0;
  return static_cast<std::uint64_t>(status.st_ino);
}

owner_state page_owner_state(pid_t pid, std::uint64_t start_time, std::uint64_t pid_namespace) {
  const std::uint64_t ours = own_pid_namespace();
  if (ours == 0 || pid_namespace != ours) return owner_state::other_namespace;
  return process_is_running(pid, start_time) ? owner_state::running : owner_state::gone;
}

bool process_is_running(pid_t pid, std::uint64_t start_time) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  if (start_time == 0) return true;
  // An unreadable /proc entry (hidepid) says nothing: the process exists.
  const std::uint64_t actual = process_start_time(pid);
  return actual == 0 || actual == start_time;
}

}  // namespace fragless::stats_directory
