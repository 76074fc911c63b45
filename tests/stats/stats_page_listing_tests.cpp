// Listing published pages: stale pages are skipped and removed, bad ones reported; a page
// of another PID namespace is never removed nor written over; a page whose body is garbage
// is reported corrupt; untrusted text is made printable.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "fragless/stats_publisher.hpp"
#include "publisher_test_support.hpp"
#include "runtime_directory.hpp"
#include "stats_directory.hpp"
#include "stats_page.hpp"
#include "stats_page_reader.hpp"

using namespace fragless;
namespace fs = std::filesystem;
using namespace fragless::testing;

TEST_CASE("listing skips and removes stale pages, and reports bad ones") {
  runtime_directory runtime;
  auto publisher = publishing_known_stats(1);
  // A stale copy claiming a pid that does not exist.
  // (4194000: below PID_MAX_LIMIT, so a plausible pid, and far above any pid in use here.)
  const std::string stale = runtime.stats_dir() + "/4194000.stats";
  fs::copy_file(runtime.page_path(), stale);
  {
    const int fd = ::open(stale.c_str(), O_RDWR);
    const std::int64_t pid = 4194000;
    ::pwrite(fd, &pid, sizeof pid, offsetof(stats_page::header, pid));
    ::close(fd);
  }
  { std::ofstream(runtime.stats_dir() + "/12.stats") << "junk"; }
  ::chmod((runtime.stats_dir() + "/12.stats").c_str(), 0600);
  std::string error;
  auto entries = stats_reader::list_pages(true, error);
  REQUIRE(entries.size() == 2);
  CHECK(entries[0].file_name == "12.stats");
  CHECK(entries[0].status == stats_reader::open_status::bad_format);
  CHECK(entries[1].status == stats_reader::open_status::ok);
  CHECK(entries[1].opened->pid() == ::getpid());
  CHECK_FALSE(fs::exists(stale));
}

namespace {

// A copy of our own page as `name` with header fields patched
// (Note [Stats pages across PID namespaces]): what a process in another namespace sharing
// the directory would write.
void write_page_copy(const runtime_directory& runtime, const std::string& name, std::int64_t pid,
                     std::uint64_t pid_namespace) {
  const std::string path = runtime.stats_dir() + "/" + name;
  fs::copy_file(runtime.page_path(), path, fs::copy_options::overwrite_existing);
  ::chmod(path.c_str(), 0600);
  const int fd = ::open(path.c_str(), O_RDWR);
  REQUIRE(::pwrite(fd, &pid, sizeof pid, offsetof(stats_page::header, pid)) == sizeof pid);
  REQUIRE(::pwrite(fd, &pid_namespace, sizeof pid_namespace, offsetof(stats_page::header, pid_namespace)) ==
          sizeof pid_namespace);
  ::close(fd);
}

}  // namespace

TEST_CASE("a page of another PID namespace is never removed; one of ours whose process is gone is") {
  runtime_directory runtime;
  auto publisher = publishing_known_stats(1);
  const std::uint64_t own = stats_directory::own_pid_namespace();
  REQUIRE(own != 0);
  // pid 4194001 does not exist here; in the writer's namespace it may well be alive.
  write_page_copy(runtime, "4194001.stats", 4194001, own + 1);
  write_page_copy(runtime, "4194002.stats", 4194002, own);
  std::string error;
  auto entries = stats_reader::list_pages(true, error);
  CHECK(fs::exists(runtime.stats_dir() + "/4194001.stats"));
  CHECK_FALSE(fs::exists(runtime.stats_dir() + "/4194002.stats"));
  REQUIRE(entries.size() == 2);
  CHECK(entries[1].file_name == "4194001.stats");
  CHECK(entries[1].status == stats_reader::open_status::ok);
  REQUIRE(entries[1].opened != nullptr);
  CHECK(entries[1].opened->other_namespace());
  CHECK(entries[1].opened->process_running());
  // An unknown namespace (0: the writer could not read its own) is not provably ours either.
  write_page_copy(runtime, "4194003.stats", 4194003, 0);
  entries = stats_reader::list_pages(true, error);
  CHECK(fs::exists(runtime.stats_dir() + "/4194003.stats"));
}

TEST_CASE("our pid's name held by a live page of another namespace: publish beside it, never over it") {
  runtime_directory runtime;
  const std::uint64_t own = stats_directory::own_pid_namespace();
  REQUIRE(own != 0);
  {
    auto first = stats_publisher::create(collect());
    REQUIRE(first != nullptr);
    const std::string kept = runtime.root + "/kept.stats";
    write_page_copy(runtime, "../kept.stats", ::getpid(), own + 7);
    first.reset();
    fs::rename(kept, runtime.page_path());
  }
  auto second = stats_publisher::create(collect());
  REQUIRE(second != nullptr);
  CHECK(warnings.empty());
  CHECK(second->file_path() == runtime.stats_dir() + "/" + std::to_string(::getpid()) + "-" + std::to_string(own) +
                                   ".stats");
  CHECK(fs::exists(runtime.page_path()));  // the other namespace's page is left alone
  second->publish(1, known_stats(9));
  stats_reader::open_status status{};
  std::string error;
  auto page = stats_reader::page::open(::getpid(), status, error);
  REQUIRE(page != nullptr);
  CHECK(page->file_name() == std::to_string(::getpid()) + "-" + std::to_string(own) + ".stats");
  CHECK_FALSE(page->other_namespace());
  CHECK(page->read_devices().at(0).stats == known_stats(9));
}

TEST_CASE("a page whose body is garbage is reported corrupt, never read as numbers") {
  runtime_directory runtime;
  auto publisher = publishing_known_stats(1);
  const std::string copy = runtime.stats_dir() + "/4194004.stats";
  write_page_copy(runtime, "4194004.stats", 4194004, stats_directory::own_pid_namespace() + 1);
  const auto open_copy = [&](stats_reader::open_status& status, std::string& error) {
    const int directory_fd = ::open(runtime.stats_dir().c_str(), O_RDONLY | O_DIRECTORY);
    auto page = stats_reader::page::open_file(directory_fd, "4194004.stats", status, error);
    ::close(directory_fd);
    return page;
  };
  stats_reader::open_status status{};
  std::string error;
  REQUIRE(open_copy(status, error) != nullptr);  // intact: readable
  SECTION("random body") {
    std::vector<unsigned char> body(stats_page::total_bytes - sizeof(stats_page::header));
    std::uint64_t x = 88172645463325252ull;
    for (auto& b : body) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      b = static_cast<unsigned char>(x);
    }
    // Even sequences everywhere, so every slot looks published and settled.
    for (std::uint32_t d = 0; d < stats_page::device_capacity; ++d)
      body[d * sizeof(stats_page::device_slot)] &= 0xfe;
    const int fd = ::open(copy.c_str(), O_RDWR);
    REQUIRE(::pwrite(fd, body.data(), body.size(), sizeof(stats_page::header)) == static_cast<ssize_t>(body.size()));
    ::close(fd);
  }
  SECTION("one negative byte count") {
    const int fd = ::open(copy.c_str(), O_RDWR);
    const std::int64_t negative = -(std::int64_t{1} << 50);
    REQUIRE(::pwrite(fd, &negative, sizeof negative,
                     static_cast<off_t>(sizeof(stats_page::header) + offsetof(stats_page::device_slot, values) +
                                        8 * sizeof(std::int64_t))) == sizeof negative);
    ::close(fd);
  }
  SECTION("a publish time in the future") {
    const int fd = ::open(copy.c_str(), O_RDWR);
    const std::int64_t future = std::int64_t{1} << 62;
    REQUIRE(::pwrite(fd, &future, sizeof future,
                     static_cast<off_t>(sizeof(stats_page::header) + offsetof(stats_page::device_slot, published_ns))) ==
            sizeof future);
    ::close(fd);
  }
  SECTION("a pid the file name does not match") {
    const int fd = ::open(copy.c_str(), O_RDWR);
    const std::int64_t pid = 77;
    REQUIRE(::pwrite(fd, &pid, sizeof pid, offsetof(stats_page::header, pid)) == sizeof pid);
    ::close(fd);
  }
  auto page = open_copy(status, error);
  CHECK(page == nullptr);
  CHECK(status == stats_reader::open_status::bad_format);
  CHECK(error.find("corrupt") != std::string::npos);
}

TEST_CASE("untrusted text is made printable: no control characters, valid UTF-8") {
  using stats_reader::printable_text;
  CHECK(printable_text("python3") == "python3");
  CHECK(printable_text("caf\xc3\xa9 \xe2\x82\xac") == "caf\xc3\xa9 \xe2\x82\xac");  // valid UTF-8 kept
  CHECK(printable_text("\x1b[2Jx") == "\\x1b[2Jx");
  CHECK(printable_text("a\xff" "b") == "a\\xffb");
  CHECK(printable_text("\xc2\x9b") == "\\xc2\\x9b");      // C1 CSI
  CHECK(printable_text("\xc0\xaf") == "\\xc0\\xaf");      // overlong '/'
  CHECK(printable_text("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a surrogate
  CHECK(printable_text("\xe2\x82") == "\\xe2\\x82");      // truncated
  CHECK(printable_text("back\\slash") == "back\\\\slash");
  CHECK(printable_text(std::string("a\0b", 3)) == "a\\x00b");
}
