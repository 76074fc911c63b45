// The per-user stats directory and the only ways fragless opens files in it. Invariants:
// the directory is a real directory (no symlink), owned by the current user, with no
// group/other access; files are created exclusively (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600
// set by fchmod, so the umask is never touched) and opened only if they are regular
// files owned by the current user with no group/other access.
#pragma once

#include <cstdint>
#include <string>
#include <sys/types.h>

namespace fragless::stats_directory {

// $XDG_RUNTIME_DIR/fragless when XDG_RUNTIME_DIR is set (absolute), else
// /dev/shm/fragless-<uid>.
std::string path();

// Opens the directory (creating it, mode 0700, when `create`). Returns an O_DIRECTORY fd,
// or -1 with `error` set (one line: what and why).
int open_directory(bool create, std::string& error);

// Creates `name` in the directory exclusively, read-write, mode 0600. -1 + error when it
// exists (a pre-created file or symlink is never reused) or cannot be created.
int create_file(int directory_fd, const std::string& name, std::string& error);

// Opens an existing file for reading (or read-write) after checking it is a regular file
// owned by us without group/other access, and not a symlink. -1 + error otherwise.
int open_file(int directory_fd, const std::string& name, bool writable, std::string& error);

// "<pid>.stats"
std::string page_file_name(pid_t pid);
// The process's start time in clock ticks since boot (/proc/<pid>/stat field 22);
// 0 when the process does not exist or /proc is not readable.
std::uint64_t process_start_time(pid_t pid);

// Whether a process with this pid and start time is running (start_time 0: pid only).
// Only meaningful for a pid of our own PID namespace.
bool process_is_running(pid_t pid, std::uint64_t start_time);

// Note [Stats pages across PID namespaces]
// Processes in different PID namespaces can share one stats directory (a container run
// with --ipc=host and the host's /dev/shm, or a shared XDG_RUNTIME_DIR): a pid is only
// meaningful inside its own namespace, so "no process 1 here" says nothing about the page
// "1.stats" a container wrote. A page records its writer's PID namespace (the inode of
// /proc/self/ns/pid) and start time (/proc/self/stat field 22). A reader treats a page as
// stale -- and may remove it -- only when the page is of the reader's own namespace (both
// inodes known and equal) and that pid is gone or now has another start time. A page of
// another namespace, or of an unknown one, is never removed and is listed as such. A
// publisher whose "<pid>.stats" is taken by a live page of another namespace publishes as
// "<pid>-<namespace inode>.stats" instead; readers look for both names.

// The inode of /proc/self/ns/pid; 0 when unreadable.
std::uint64_t own_pid_namespace();

enum class owner_state {
  running,          // same namespace, pid alive with the recorded start time
  gone,             // same namespace, pid gone or reused: the page is stale
  other_namespace,  // another (or an unknown) namespace: cannot tell, never removed
};
// Note [Stats pages across PID namespaces]
owner_state page_owner_state(pid_t pid, std::uint64_t start_time, std::uint64_t pid_namespace);

// "<pid>-<pid_namespace>.stats": the name used when "<pid>.stats" belongs to another namespace.
std::string namespaced_page_file_name(pid_t pid, std::uint64_t pid_namespace);

}  // namespace fragless::stats_directory
