// libFuzzer harness for the stats page reader (Note [Stats page validation]): a valid page
// whose bytes from the header's pid onwards -- pid, start time, PID namespace, command,
// request fields and every device slot -- are replaced by the fuzzer's input, opened and
// read as fragless-stats does. Invariants checked: no crash; a page either is refused with a
// reason or yields a printable command and readings that pass check_reading.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "stats_directory.hpp"
#include "stats_page.hpp"
#include "stats_page_reader.hpp"

namespace {

constexpr const char* kName = "4194001.stats";
char root_path[] = "/tmp/fragless-page-fuzz-XXXXXX";

void remove_directory() {
  const std::string directory = fragless::stats_directory::path();
  ::unlink((directory + "/" + kName).c_str());
  ::rmdir(directory.c_str());
  ::rmdir(root_path);
}

int stats_directory_fd() {
  static const int fd = [] {
    if (::mkdtemp(root_path) == nullptr) std::abort();
    ::setenv("XDG_RUNTIME_DIR", root_path, 1);
    std::string error;
    const int opened = fragless::stats_directory::open_directory(true, error);
    if (opened < 0) std::abort();
    std::atexit(remove_directory);
    return opened;
  }();
  return fd;
}

std::vector<unsigned char> valid_page() {
  std::vector<unsigned char> page(fragless::stats_page::total_bytes, 0);
  auto& header = *reinterpret_cast<fragless::stats_page::header*>(page.data());
  std::memcpy(header.magic, fragless::stats_page::magic, sizeof header.magic);
  header.version = fragless::stats_page::version;
  header.header_bytes = sizeof(fragless::stats_page::header);
  header.total_bytes = fragless::stats_page::total_bytes;
  header.layout_hash = fragless::stats_page::layout_hash();
  header.device_capacity = fragless::stats_page::device_capacity;
  header.slot_bytes = sizeof(fragless::stats_page::device_slot);
  header.pid = 4194001;
  return page;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace fragless;
  const int directory_fd = stats_directory_fd();
  std::vector<unsigned char> page = valid_page();
  const std::size_t start = offsetof(stats_page::header, pid);
  std::memcpy(page.data() + start, data, std::min(size, page.size() - start));
  ::unlinkat(directory_fd, kName, 0);
  std::string error;
  const int fd = stats_directory::create_file(directory_fd, kName, error);
  if (fd < 0) std::abort();
  if (::write(fd, page.data(), page.size()) != static_cast<ssize_t>(page.size())) std::abort();
  ::close(fd);
  stats_reader::open_status status{};
  auto opened = stats_reader::page::open_file(directory_fd, kName, status, error);
  if (opened == nullptr) {
    if (status == stats_reader::open_status::ok || error.empty()) std::abort();
    return 0;
  }
  for (char c : opened->command())
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) std::abort();
  std::string corrupt;
  for (const stats_reader::device_reading& reading : opened->read_devices(&corrupt))
    if (!stats_reader::check_reading(reading).empty()) std::abort();
  return 0;
}
