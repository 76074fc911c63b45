// stats_publisher: this process's stats page (Note [Stats page seqlock],
// Note [Stats page requests] in stats_page.hpp). Invariants: the page is mapped once and never remapped;
// after fork() a child never writes into the page (it belongs to the parent); the file is
// unlinked by the destructor and, for publishers still alive at exit, by an atexit hook.
#include "fragless/stats_publisher.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <new>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "fragless/options.hpp"
#include "stats_directory.hpp"
#include "stats_page.hpp"

namespace fragless {

struct stats_publisher::state {
  int directory_fd = -1;
  std::string file_name;
  std::string file_path;
  void* page = nullptr;
  std::atomic<bool> inert{false};  // set in a forked child
  std::mutex request_mutex;        // one poll_requests at a time
  std::thread request_thread;
  std::mutex thread_mutex;
  std::condition_variable thread_wake;
  bool thread_stop = false;

  stats_page::header& header() { return *static_cast<stats_page::header*>(page); }
};

namespace {

static_assert(std::atomic<std::uint64_t>::is_always_lock_free && std::atomic<std::int64_t>::is_always_lock_free,
              "the stats page needs lock-free 64-bit atomics");

// Note [Publisher registry and fork]
// The atexit hook removes the page files of publishers still alive at exit; the fork hook
// makes every inherited publisher inert in the child (the pages belong to the parent,
// which removes them). The child may hold locks or half-updated state copied from a
// thread of the parent, so it does not use the parent's registry: it marks the inherited
// flags and starts a fresh registry (the old one is leaked on purpose). The flags are read
// whole: the forking thread holds the registry's lock across fork(), so no other thread is
// adding one. And the child's handler allocates nothing: the fresh registry is made before
// the fork, in the parent. A child handler runs before any the program registered later,
// and a malloc other than glibc's (jemalloc, tcmalloc) may not be usable in the child until
// its own handler ran; under ThreadSanitizer a child's allocation can wait for ever on a
// lock of the sanitizer's that a parent thread held.
struct publisher_registry {
  std::mutex mutex;
  std::vector<std::pair<int, std::string>> exit_files;  // (directory fd, name)
  std::vector<std::atomic<bool>*> inert_flags;
  // In a forked child: the parent's registry and the states of inherited publishers that
  // were destroyed, kept reachable rather than touched (Note [Publisher registry and fork]).
  publisher_registry* inherited_from = nullptr;
  std::vector<void*> abandoned_states;
};
std::atomic<publisher_registry*> current_registry{nullptr};
// Note [Publisher registry and fork]: the registry a forked child starts from, made before
// the fork; and the registry whose lock the forking thread holds across it.
std::atomic<publisher_registry*> registry_for_child{nullptr};
publisher_registry* locked_for_fork = nullptr;
std::atomic<bool> keep_page_files_at_exit{false};

void unlink_at_exit() {
  publisher_registry* registry = current_registry.load();
  if (registry == nullptr || keep_page_files_at_exit.load()) return;
  std::lock_guard<std::mutex> lock(registry->mutex);
  for (const auto& [fd, name] : registry->exit_files) ::unlinkat(fd, name.c_str(), 0);
  registry->exit_files.clear();
}

void prepare_fork() {
  if (registry_for_child.load() == nullptr) {
    publisher_registry* made = new (std::nothrow) publisher_registry();
    publisher_registry* none = nullptr;
    if (made != nullptr && !registry_for_child.compare_exchange_strong(none, made)) delete made;
  }
  publisher_registry* registry = current_registry.load();
  if (registry != nullptr) registry->mutex.lock();
  locked_for_fork = registry;
}

void parent_after_fork() {
  if (locked_for_fork != nullptr) locked_for_fork->mutex.unlock();
  locked_for_fork = nullptr;
}

void mark_inert_after_fork() {
  publisher_registry* inherited = locked_for_fork;
  locked_for_fork = nullptr;
  if (inherited == nullptr) return;
  for (std::atomic<bool>* flag : inherited->inert_flags) flag->store(true, std::memory_order_relaxed);
  publisher_registry* fresh = registry_for_child.exchange(nullptr);
  if (fresh == nullptr) {
    // No host memory before the fork: the child keeps the inherited registry (whose lock
    // this thread took before the fork), and its exit removes no page file (they are the
    // parent's; a stale one of its own is removed by the next listing).
    keep_page_files_at_exit.store(true);
    inherited->mutex.unlock();
    return;
  }
  fresh->inherited_from = inherited;
  current_registry.store(fresh);
}

void install_hooks_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    current_registry.store(new publisher_registry());
    std::atexit(unlink_at_exit);
    ::pthread_atfork(prepare_fork, parent_after_fork, mark_inert_after_fork);
  });
}

std::string own_command() {
  char buffer[stats_page::command_bytes] = {};
  const int fd = ::open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer - 1);
    ::close(fd);
    if (n > 0) {
      std::string text(buffer, static_cast<std::size_t>(n));
      while (!text.empty() && text.back() == '\n') text.pop_back();
      return text;
    }
  }
  return "?";
}

// Reads the header of `name` when it is a stats page (a regular file of ours with the magic).
bool read_page_header(int directory_fd, const std::string& name, stats_page::header& header) {
  std::string error;
  const int fd = stats_directory::open_file(directory_fd, name, false, error);
  if (fd < 0) return false;
  const ssize_t n = ::pread(fd, &header, sizeof header, 0);
  ::close(fd);
  return n == static_cast<ssize_t>(sizeof header) &&
         std::memcmp(header.magic, stats_page::magic, sizeof header.magic) == 0;
}

// Whether `name` is a stats page written in another PID namespace than ours
// (Note [Stats pages across PID namespaces]).
bool is_other_namespace_page(int directory_fd, const std::string& name, std::uint64_t own_namespace) {
  stats_page::header header{};
  return read_page_header(directory_fd, name, header) && header.pid_namespace != own_namespace;
}

// A stale page of ours: a regular file we own whose recorded process is provably gone
// (Note [Stats pages across PID namespaces]): of our namespace, and that pid is gone or is
// another process than the one that wrote it (we hold the pid now, so a same-namespace page
// with another start time is an earlier holder's).
bool is_stale_page(int directory_fd, const std::string& name) {
  stats_page::header header{};
  if (!read_page_header(directory_fd, name, header)) return false;
  const std::uint64_t own_namespace = stats_directory::own_pid_namespace();
  if (own_namespace == 0 || header.pid_namespace != own_namespace) return false;
  return !stats_directory::process_is_running(static_cast<pid_t>(header.pid), header.start_time_ticks) ||
         header.start_time_ticks != stats_directory::process_start_time(::getpid());
}

void write_all(int fd, const std::string& text, int& status) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      status = errno;
      return;
    }
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

std::unique_ptr<stats_publisher> stats_publisher::create(const warning_callback& warn) noexcept {
  const auto report = [&](const std::string& message) noexcept {
    try {
      const std::string text = "stats publishing off: " + message;
      if (warn) warn(text);
      else warn_to_stderr_once(text);
    } catch (...) {
    }
  };
  try {
    install_hooks_once();
    auto s = std::make_unique<state>();
    std::string error;
    s->directory_fd = stats_directory::open_directory(true, error);
    if (s->directory_fd < 0) {
      report(error);
      return nullptr;
    }
    s->file_name = stats_directory::page_file_name(::getpid());
    s->file_path = stats_directory::path() + "/" + s->file_name;
    const std::uint64_t own_namespace = stats_directory::own_pid_namespace();
    int fd = stats_directory::create_file(s->directory_fd, s->file_name, error);
    if (fd < 0 && is_stale_page(s->directory_fd, s->file_name)) {
      ::unlinkat(s->directory_fd, s->file_name.c_str(), 0);
      fd = stats_directory::create_file(s->directory_fd, s->file_name, error);
    }
    if (fd < 0 && own_namespace != 0 && is_other_namespace_page(s->directory_fd, s->file_name, own_namespace)) {
      // "<pid>.stats" belongs to a live process of another PID namespace: publish under our
      // namespace's name for the pid (Note [Stats pages across PID namespaces]).
      s->file_name = stats_directory::namespaced_page_file_name(::getpid(), own_namespace);
      s->file_path = stats_directory::path() + "/" + s->file_name;
      fd = stats_directory::create_file(s->directory_fd, s->file_name, error);
      if (fd < 0 && is_stale_page(s->directory_fd, s->file_name)) {
        ::unlinkat(s->directory_fd, s->file_name.c_str(), 0);
        fd = stats_directory::create_file(s->directory_fd, s->file_name, error);
      }
    }
    if (fd < 0) {
      report(error);
      ::close(s->directory_fd);
      return nullptr;
    }
    void* page = MAP_FAILED;
    if (::ftruncate(fd, static_cast<off_t>(stats_page::total_bytes)) == 0)
      page = ::mmap(nullptr, stats_page::total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const int saved = errno;
    ::close(fd);
    if (page == MAP_FAILED) {
      report(s->file_path + ": " + std::strerror(saved));
      ::unlinkat(s->directory_fd, s->file_name.c_str(), 0);
      ::close(s->directory_fd);
      return nullptr;
    }
    s->page = page;
    stats_page::header& header = s->header();
    header.version = stats_page::version;
    header.header_bytes = sizeof(stats_page::header);
    header.total_bytes = stats_page::total_bytes;
    header.layout_hash = stats_page::layout_hash();
    header.device_capacity = stats_page::device_capacity;
    header.slot_bytes = sizeof(stats_page::device_slot);
    header.pid = ::getpid();
    header.start_time_ticks = stats_directory::process_start_time(::getpid());
    header.pid_namespace = own_namespace;
    const std::string command = own_command();
    std::memcpy(header.command, command.data(), std::min(command.size(), sizeof header.command - 1));
    // The magic goes last: a reader seeing it sees a complete header.
    std::atomic_thread_fence(std::memory_order_release);
    std::memcpy(header.magic, stats_page::magic, sizeof header.magic);

    std::unique_ptr<stats_publisher> publisher(new stats_publisher(std::move(s)));
    {
      publisher_registry& registry = *current_registry.load();
      std::lock_guard<std::mutex> lock(registry.mutex);
      registry.exit_files.emplace_back(publisher->state_->directory_fd, publisher->state_->file_name);
      registry.inert_flags.push_back(&publisher->state_->inert);
    }
    return publisher;
  } catch (...) {
    report("out of memory");
    return nullptr;
  }
}

stats_publisher::stats_publisher(std::unique_ptr<state> s) noexcept : state_(std::move(s)) {}

stats_publisher::~stats_publisher() {
  const bool inherited = state_->inert.load(std::memory_order_relaxed);
  if (inherited) {
    // A forked child: the thread and the locks belong to the parent's copy. Forget the
    // thread handle (joining a thread that does not exist here would fail) and the state
    // (its mutexes may be held), and unmap the page.
    new (&state_->request_thread) std::thread();
    ::munmap(state_->page, stats_page::total_bytes);
    ::close(state_->directory_fd);
    void* abandoned = state_.release();
    try {
      publisher_registry& registry = *current_registry.load();
      std::lock_guard<std::mutex> lock(registry.mutex);
      registry.abandoned_states.push_back(abandoned);
    } catch (...) {
    }
    return;
  }
  {
    std::lock_guard<std::mutex> lock(state_->thread_mutex);
    state_->thread_stop = true;
  }
  state_->thread_wake.notify_all();
  if (state_->request_thread.joinable()) state_->request_thread.join();
  {
    publisher_registry& registry = *current_registry.load();
    std::lock_guard<std::mutex> lock(registry.mutex);
    std::erase_if(registry.exit_files, [&](const auto& entry) { return entry.second == state_->file_name; });
    std::erase(registry.inert_flags, &state_->inert);
  }
  ::unlinkat(state_->directory_fd, state_->file_name.c_str(), 0);
  ::munmap(state_->page, stats_page::total_bytes);
  ::close(state_->directory_fd);
}

void stats_publisher::publish(int device, const device_stats& stats) noexcept {
  if (device < 0 || device >= static_cast<int>(stats_page::device_capacity)) return;
  if (state_->inert.load(std::memory_order_relaxed)) return;
  stats_page::write_slot(*stats_page::slot(state_->page, static_cast<std::uint32_t>(device)), stats);
}

bool stats_publisher::poll_requests(const snapshot_callback& take_snapshot) noexcept {
  if (state_->inert.load(std::memory_order_relaxed)) return false;
  stats_page::header& header = state_->header();
  const std::uint64_t requested = header.request_sequence.load(std::memory_order_acquire);
  if (requested == header.response_sequence.load(std::memory_order_relaxed)) return false;
  std::lock_guard<std::mutex> lock(state_->request_mutex);
  if (requested == header.response_sequence.load(std::memory_order_relaxed)) return false;
  int status = 0;
  try {
    char name_buffer[stats_page::request_name_bytes];
    std::memcpy(name_buffer, header.request_name, sizeof name_buffer);
    name_buffer[sizeof name_buffer - 1] = '\0';
    const std::string name(name_buffer);
    if (!stats_page::is_safe_file_name(name)) {
      status = EINVAL;
    } else {
      std::string error;
      const int fd = stats_directory::create_file(state_->directory_fd, name, error);
      if (fd < 0) {
        status = errno != 0 ? errno : EEXIST;
      } else {
        const memory_snapshot snapshot = take_snapshot ? take_snapshot() : memory_snapshot{};
        write_all(fd, to_json(snapshot), status);
        if (::close(fd) != 0 && status == 0) status = errno;
      }
    }
  } catch (...) {
    status = ENOMEM;
  }
  header.response_status.store(status, std::memory_order_relaxed);
  header.response_sequence.store(requested, std::memory_order_release);
  return status == 0;
}

void stats_publisher::start_background_thread(refresh_callback refresh, snapshot_callback take_snapshot,
                                              std::chrono::milliseconds interval) {
  if (state_->request_thread.joinable()) return;
  state_->request_thread =
      std::thread([this, refresh = std::move(refresh), take_snapshot = std::move(take_snapshot), interval] {
        std::unique_lock<std::mutex> lock(state_->thread_mutex);
        while (!state_->thread_stop) {
          lock.unlock();
          if (refresh && !state_->inert.load(std::memory_order_relaxed)) {
            try {
              refresh(*this);
            } catch (...) {
              // A failed refresh leaves the last published stats in place.
            }
          }
          poll_requests(take_snapshot);
          lock.lock();
          state_->thread_wake.wait_for(lock, interval, [&] { return state_->thread_stop; });
        }
      });
}

void stats_publisher::start_request_thread(snapshot_callback take_snapshot, std::chrono::milliseconds interval) {
  start_background_thread({}, std::move(take_snapshot), interval);
}

const std::string& stats_publisher::file_path() const noexcept { return state_->file_path; }

}  // namespace fragless
