// Live publishing: known stats come back exactly; files and directory are private; a
// pre-created file, a symlink or a foreign-mode directory is refused; bad pages are
// rejected with a reason; seqlock reads are never torn; snapshot requests round-trip; a
// forked child does not write into its parent's page.
#include <catch2/catch.hpp>

#include <atomic>
#include <csignal>
#include <stdexcept>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <cstring>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "fragless/stats_publisher.hpp"
#include "stats_directory.hpp"
#include "stats_page.hpp"
#include "stats_page_reader.hpp"
#include "publisher_test_support.hpp"
#include "runtime_directory.hpp"

using namespace fragless;
namespace fs = std::filesystem;
using namespace fragless::testing;

TEST_CASE("published stats are read back exactly, per device") {
  runtime_directory runtime;
  auto publisher = stats_publisher::create(collect());
  REQUIRE(publisher != nullptr);
  CHECK(publisher->file_path() == runtime.page_path());
  publisher->publish(0, known_stats(100));
  publisher->publish(3, known_stats(5000));
  publisher->publish(64, known_stats(1));  // beyond capacity: ignored
  publisher->publish(-1, known_stats(1));

  stats_reader::open_status status{};
  std::string error;
  auto page = stats_reader::page::open(::getpid(), status, error);
  REQUIRE(status == stats_reader::open_status::ok);
  REQUIRE(page != nullptr);
  CHECK(page->pid() == ::getpid());
  CHECK_FALSE(page->command().empty());
  const auto devices = page->read_devices();
  REQUIRE(devices.size() == 2);
  CHECK(devices[0].device == 0);
  CHECK(devices[0].stats == known_stats(100));
  CHECK(devices[1].device == 3);
  CHECK(devices[1].stats == known_stats(5000));
  CHECK(devices[1].published_ns > 0);

  publisher->publish(0, known_stats(7));
  CHECK(page->read_devices()[0].stats == known_stats(7));
}

TEST_CASE("the directory is 0700 and the page 0600, and the page is removed with the publisher") {
  runtime_directory runtime;
  const mode_t old_umask = ::umask(0);  // a permissive umask must not widen anything
  auto publisher = stats_publisher::create(collect());
  ::umask(old_umask);
  REQUIRE(publisher != nullptr);
  struct ::stat status{};
  REQUIRE(::stat(runtime.stats_dir().c_str(), &status) == 0);
  CHECK((status.st_mode & 0777) == 0700);
  REQUIRE(::stat(runtime.page_path().c_str(), &status) == 0);
  CHECK((status.st_mode & 0777) == 0600);
  CHECK(status.st_uid == ::geteuid());
  publisher.reset();
  CHECK_FALSE(fs::exists(runtime.page_path()));
}

TEST_CASE("a pre-created file or a symlink in place of the page is refused") {
  runtime_directory runtime;
  ::mkdir(runtime.stats_dir().c_str(), 0700);
  SECTION("pre-created regular file (not a stale page)") {
    { std::ofstream(runtime.page_path()) << "not a stats page"; }
    ::chmod(runtime.page_path().c_str(), 0600);
    CHECK(stats_publisher::create(collect()) == nullptr);
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0].find("already exists") != std::string::npos);
    std::ifstream in(runtime.page_path());
    std::string content;
    std::getline(in, content);
    CHECK(content == "not a stats page");
  }
  SECTION("symlink to a file elsewhere") {
    const std::string target = runtime.root + "/victim";
    { std::ofstream(target) << "precious"; }
    REQUIRE(::symlink(target.c_str(), runtime.page_path().c_str()) == 0);
    CHECK(stats_publisher::create(collect()) == nullptr);
    CHECK(warnings.size() == 1);
    CHECK(fs::file_size(target) == 8);
    stats_reader::open_status status{};
    std::string error;
    CHECK(stats_reader::page::open(::getpid(), status, error) == nullptr);
    CHECK(status == stats_reader::open_status::refused);
    CHECK(error.find("symlink") != std::string::npos);
  }
  SECTION("stats directory that is a symlink") {
    ::rmdir(runtime.stats_dir().c_str());
    const std::string elsewhere = runtime.root + "/elsewhere";
    ::mkdir(elsewhere.c_str(), 0700);
    REQUIRE(::symlink(elsewhere.c_str(), runtime.stats_dir().c_str()) == 0);
    CHECK(stats_publisher::create(collect()) == nullptr);
    CHECK(fs::is_empty(elsewhere));
  }
  SECTION("stats directory readable by others") {
    ::chmod(runtime.stats_dir().c_str(), 0755);
    CHECK(stats_publisher::create(collect()) == nullptr);
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0].find("0700") != std::string::npos);
  }
}

TEST_CASE("a stale page of a dead process with our pid is replaced") {
  runtime_directory runtime;
  {
    auto first = stats_publisher::create(collect());
    REQUIRE(first != nullptr);
    // Make it look like it was written by an earlier process that had our pid.
    const int fd = ::open(runtime.page_path().c_str(), O_RDWR);
    stats_page::header header;
    REQUIRE(::pread(fd, &header, sizeof header, 0) == sizeof header);
    header.start_time_ticks += 12345;
    REQUIRE(::pwrite(fd, &header, sizeof header, 0) == sizeof header);
    ::close(fd);
    const std::string kept = runtime.root + "/kept.stats";
    fs::copy_file(runtime.page_path(), kept);
    first.reset();
    fs::rename(kept, runtime.page_path());
  }
  auto second = stats_publisher::create(collect());
  CHECK(second != nullptr);
  CHECK(warnings.empty());
}

TEST_CASE("pages with wrong magic, version, layout or size are rejected with the reason") {
  runtime_directory runtime;
  auto publisher = publishing_known_stats(1);
  const std::string path = runtime.page_path();
  const std::string copy = runtime.stats_dir() + "/999999999.stats";
  const auto reader_error = [&](auto&& damage) {
    fs::copy_file(path, copy, fs::copy_options::overwrite_existing);
    ::chmod(copy.c_str(), 0600);
    damage(copy);
    const int directory_fd = ::open(runtime.stats_dir().c_str(), O_RDONLY | O_DIRECTORY);
    stats_reader::open_status status{};
    std::string error;
    auto page = stats_reader::page::open_file(directory_fd, "999999999.stats", status, error);
    ::close(directory_fd);
    CHECK(status == stats_reader::open_status::bad_format);
    CHECK(page == nullptr);
    return error;
  };
  const auto patch = [](const std::string& file, off_t offset, const void* bytes, std::size_t size) {
    const int fd = ::open(file.c_str(), O_RDWR);
    REQUIRE(::pwrite(fd, bytes, size, offset) == static_cast<ssize_t>(size));
    ::close(fd);
  };
  CHECK(reader_error([&](const std::string& f) { patch(f, 0, "XXXX", 4); }).find("bad magic") != std::string::npos);
  const std::uint32_t version = 99;
  CHECK(reader_error([&](const std::string& f) { patch(f, 8, &version, 4); }).find("version 99") != std::string::npos);
  const std::uint64_t hash = 1;
  CHECK(reader_error([&](const std::string& f) {
          patch(f, offsetof(stats_page::header, layout_hash), &hash, 8);
        }).find("layout") != std::string::npos);
  CHECK(reader_error([&](const std::string& f) { fs::resize_file(f, stats_page::total_bytes - 1); })
            .find("truncated") != std::string::npos);
  CHECK(reader_error([&](const std::string& f) { fs::resize_file(f, 10); }).find("truncated") != std::string::npos);
}

TEST_CASE("seqlock: readers never see a torn copy while a writer publishes") {
  runtime_directory runtime;
  auto publisher = stats_publisher::create(collect());
  REQUIRE(publisher != nullptr);
  stats_reader::open_status status{};
  std::string error;
  auto page = stats_reader::page::open(::getpid(), status, error);
  REQUIRE(page != nullptr);
  std::atomic<bool> stop{false};
  // Every stored value of generation g is g: a torn read mixes generations.
  const auto generation = [](std::int64_t g) {
    device_stats stats{};
    for (const stat_value& v : flatten(stats)) set_flat_value(stats, v.key, g);
    return stats;
  };
  publisher->publish(1, generation(1));
  std::thread writer([&] {
    for (std::int64_t g = 2; !stop.load(); ++g) publisher->publish(1, generation(g));
  });
  std::atomic<long> reads{0}, torn{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r)
    readers.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        const auto devices = page->read_devices();
        if (devices.size() != 1) continue;
        const std::int64_t first = devices[0].stats.allocation[pool_all].current;
        for (const stat_value& v : flatten(devices[0].stats)) {
          if (v.key == "unused_reserved_bytes" || v.key == "fragmentation") continue;
          if (v.integer != first) {
            ++torn;
            break;
          }
        }
        ++reads;
      }
    });
  for (auto& reader : readers) reader.join();
  stop = true;
  writer.join();
  CHECK(torn == 0);
  CHECK(reads > 50000);
}

TEST_CASE("snapshot requests are answered through the page") {
  runtime_directory runtime;
  // Declared before the publisher: its request thread reads it until the publisher goes.
  memory_snapshot snapshot;
  snapshot.segments.push_back({0, 0x1000000, 2 << 20, 0, pool_small, false,
                               {{0x1000000, 1 << 20, 1000, block_state::allocated},
                                {0x1100000, 1 << 20, 0, block_state::free}}});
  auto publisher = stats_publisher::create(collect());
  REQUIRE(publisher != nullptr);
  publisher->start_request_thread([&] { return snapshot; }, std::chrono::milliseconds(5));
  stats_reader::open_status status{};
  std::string error;
  auto page = stats_reader::page::open(::getpid(), status, error);
  REQUIRE(page != nullptr);
  for (int round = 0; round < 3; ++round) {
    const std::string text = page->request_snapshot(std::chrono::milliseconds(5000), error);
    INFO(error);
    memory_snapshot back;
    REQUIRE(snapshot_from_json(text, back, error));
    CHECK(back == snapshot);
  }
  // The temporary file is gone afterwards.
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(runtime.stats_dir())) files += entry.path().extension() == ".json";
  CHECK(files == 0);
}

TEST_CASE("the background thread refreshes published stats and survives a throwing refresh") {
  runtime_directory runtime;
  auto publisher = stats_publisher::create(collect());
  REQUIRE(publisher != nullptr);
  std::atomic<int> calls{0};
  publisher->start_background_thread(
      [&](stats_publisher& p) {
        const int call = ++calls;
        if (call == 2) throw std::runtime_error("refresh failed");
        p.publish(1, known_stats(call));
      },
      {}, std::chrono::milliseconds(2));
  stats_reader::open_status status{};
  std::string error;
  auto page = stats_reader::page::open(::getpid(), status, error);
  REQUIRE(page != nullptr);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (calls < 5 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  REQUIRE(calls >= 5);
  publisher.reset();  // joins the thread
  const int last = calls.load();
  const auto devices = page->read_devices();
  REQUIRE(devices.size() == 1);
  CHECK(devices[0].stats == known_stats(last));
}

TEST_CASE("a request naming an unsafe file is refused by the process") {
  runtime_directory runtime;
  auto publisher = stats_publisher::create(collect());
  REQUIRE(publisher != nullptr);
  const int fd = ::open(runtime.page_path().c_str(), O_RDWR);
  void* mapping = ::mmap(nullptr, stats_page::total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  auto& header = *static_cast<stats_page::header*>(mapping);
  std::strcpy(header.request_name, "../escape.json");
  header.request_sequence.fetch_add(1);
  bool called = false;
  CHECK_FALSE(publisher->poll_requests([&] {
    called = true;
    return memory_snapshot{};
  }));
  CHECK_FALSE(called);
  CHECK(header.response_status.load() == EINVAL);
  CHECK(header.response_sequence.load() == header.request_sequence.load());
  CHECK_FALSE(fs::exists(runtime.root + "/escape.json"));
  // No request pending: poll is a no-op.
  CHECK_FALSE(publisher->poll_requests([&] { return memory_snapshot{}; }));
  ::munmap(mapping, stats_page::total_bytes);
}

TEST_CASE("a forked child does not write into its parent's page") {
  runtime_directory runtime;
  auto publisher = publishing_known_stats(10);
  const pid_t child = ::fork();
  if (child == 0) {
    publisher->publish(0, known_stats(99999));
    ::_exit(0);
  }
  int wait_status = 0;
  ::waitpid(child, &wait_status, 0);
  stats_reader::open_status status{};
  std::string error;
  auto page = stats_reader::page::open(::getpid(), status, error);
  REQUIRE(page != nullptr);
  CHECK(page->read_devices().at(0).stats == known_stats(10));
  CHECK(fs::exists(runtime.page_path()));  // the child's exit did not remove it
}

TEST_CASE("a forked child can drop the inherited publisher and publish on its own; exit removes its page") {
  runtime_directory runtime;
  auto publisher = stats_publisher::create(collect());
  REQUIRE(publisher != nullptr);
  publisher->start_request_thread([] { return memory_snapshot{}; }, std::chrono::milliseconds(2));
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  const pid_t child = ::fork();
  if (child == 0) {
    publisher.reset();  // inherited: must neither join the parent's thread nor unlink its page
    auto own = stats_publisher::create([](std::string_view) {});
    if (!own) ::_exit(2);
    own->publish(0, known_stats(5));
    const char ok = 'y';
    if (::write(pipe_fds[1], &ok, 1) != 1) ::_exit(3);
    static stats_publisher* kept = own.release();  // alive at exit: the atexit hook removes the page
    (void)kept;
    std::exit(0);
  }
  ::close(pipe_fds[1]);
  char ok = 0;
  CHECK(::read(pipe_fds[0], &ok, 1) == 1);
  ::close(pipe_fds[0]);
  int wait_status = 0;
  ::waitpid(child, &wait_status, 0);
  CHECK(WIFEXITED(wait_status));
  CHECK(WEXITSTATUS(wait_status) == 0);
  CHECK(ok == 'y');
  CHECK_FALSE(fs::exists(runtime.stats_dir() + "/" + std::to_string(child) + ".stats"));
  CHECK(fs::exists(runtime.page_path()));
  publisher->publish(0, known_stats(3));
  stats_reader::open_status status{};
  std::string error;
  auto page = stats_reader::page::open(::getpid(), status, error);
  REQUIRE(page != nullptr);
  CHECK(page->read_devices().at(0).stats == known_stats(3));
}

// Note [Publisher registry and fork]: threads make and drop publishers while the process
// forks; each child finds the inherited flags whole, starts from a fresh registry (made
// before the fork), publishes on its own and drops its publisher, removing only its own
// page (the atexit path is the test above's). Not in the sanitizer builds: GCC 12's
// ThreadSanitizer and AddressSanitizer runtimes do not make their allocators fork-safe,
// and a child's first allocation waits for ever on an allocator lock a parent thread held
// at fork time (seen under ASan: a size class's region lock); glibc's malloc is fork-safe.
#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
TEST_CASE("forks while other threads make and drop publishers leave each child a registry of its own") {
  runtime_directory runtime;
  auto publisher = stats_publisher::create(collect());
  REQUIRE(publisher != nullptr);
  std::atomic<bool> stop{false};
  std::vector<std::thread> churners;
  for (int t = 0; t < 2; ++t)
    churners.emplace_back([&stop] {
      while (!stop.load()) {
        auto made = stats_publisher::create([](std::string_view) {});
        made.reset();
      }
    });
  for (int i = 0; i < 20; ++i) {
    const pid_t child = ::fork();
    if (child < 0) {
      FAIL_CHECK("fork failed");
      break;
    }
    if (child == 0) {
      publisher.reset();  // inherited
      auto own = stats_publisher::create([](std::string_view) {});
      if (!own) ::_exit(2);
      own->publish(0, known_stats(7));
      own.reset();  // removes its own page
      // _exit: a child forked beside running threads runs neither the parent's atexit
      // handlers nor its static destructors, whose state those threads may have held.
      ::_exit(0);
    }
    int wait_status = 0;
    bool exited = false;
    for (int waited_ms = 0; waited_ms < 10000; waited_ms += 10) {
      if (::waitpid(child, &wait_status, WNOHANG) == child) {
        exited = true;
        break;
      }
      ::usleep(10000);
    }
    if (!exited) ::kill(child, SIGKILL), ::waitpid(child, &wait_status, 0);
    CHECK(exited);
    CHECK(WIFEXITED(wait_status));
    CHECK(WEXITSTATUS(wait_status) == 0);
    CHECK_FALSE(fs::exists(runtime.stats_dir() + "/" + std::to_string(child) + ".stats"));
    CHECK(fs::exists(runtime.page_path()));  // the parent's page stays
  }
  stop = true;  // CHECK, not REQUIRE, above: the threads are joined whatever failed
  for (auto& churner : churners) churner.join();
}
#endif  // no sanitizer
