// Sharing blocks between processes on simcuda (Note [IPC sharing]): an exported block opens
// in this process and in a freshly started one, both see and change the same memory,
// imported memory outlives the exporter's free and compaction, stale and malformed
// handles are refused, and the cudaMalloc backend shares through CUDA's IPC handles.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <simcuda/control.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "simcuda_support.hpp"

using namespace fragless;
using namespace fragless::testing;

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

std::string to_hex(const std::string& bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::string from_hex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

// Runs this test program again as another process, running only the hidden test case
// below with the handle in its environment; returns its exit status.
int run_importer(const std::string& handle, std::uint64_t seed, std::size_t bytes) {
  const pid_t child = fork();
  if (child == 0) {
    setenv("FRAGLESS_TEST_IPC_HANDLE", to_hex(handle).c_str(), 1);
    setenv("FRAGLESS_TEST_IPC_SEED", std::to_string(seed).c_str(), 1);
    setenv("FRAGLESS_TEST_IPC_BYTES", std::to_string(bytes).c_str(), 1);
    execl("/proc/self/exe", "ipc-importer", "[.ipc_importer]", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

// The other process's side: opens the handle, checks the exporter's pattern, writes the
// next seed's pattern for the exporter to see.
TEST_CASE("ipc importer process", "[.ipc_importer]") {
  const char* hex = std::getenv("FRAGLESS_TEST_IPC_HANDLE");
  REQUIRE(hex != nullptr);
  const std::uint64_t seed = std::stoull(std::getenv("FRAGLESS_TEST_IPC_SEED"));
  const std::size_t bytes = std::stoull(std::getenv("FRAGLESS_TEST_IPC_BYTES"));
  auto instance = make_simcuda_allocator(core::cache_settings{});
  void* opened = instance->import_block(from_hex(hex));
  REQUIRE(check_pattern(opened, bytes, seed));
  fill_pattern(opened, bytes, seed + 1);
  instance->close_imported_block(opened);
}

TEST_CASE("an exported block opens here and in another process, on the same memory", "[ipc]") {
  reset_simcuda();
  core::cache_settings settings;
  settings.exact_start_allocations = 0;  // the 4 KiB block comes from a slab
  settings.conf.dedicated_mapping_threshold_bytes = 64 * kMiB;
  auto instance = make_simcuda_allocator(settings);
  void* spacer = instance->allocate(kMiB + 512, 0, nullptr);  // later blocks straddle pages
  // A slab object, a block over several pages of the shared range, a dedicated mapping.
  for (const std::size_t bytes : {std::size_t{4096}, 5 * kMiB + 4096, 80 * kMiB}) {
    INFO(bytes << " bytes");
    void* block = instance->allocate(bytes, 0, nullptr);
    fill_pattern(block, bytes, 100 + bytes);
    const std::string handle = instance->export_block(block);
    CHECK(instance->export_block(block) == handle);  // same handle again
    void* here = instance->import_block(handle);
    CHECK(here != block);  // a second mapping of the same memory
    CHECK(check_pattern(here, bytes, 100 + bytes));
    fill_pattern(here, bytes, 200 + bytes);
    CHECK(check_pattern(block, bytes, 200 + bytes));
    instance->close_imported_block(here);
    // Another process: it sees our data and we see its writes.
    REQUIRE(run_importer(handle, 200 + bytes, bytes) == 0);
    CHECK(check_pattern(block, bytes, 201 + bytes));
    instance->deallocate(block);
  }
  instance->deallocate(spacer);
}

TEST_CASE("imported memory outlives the exporter's free and compaction", "[ipc]") {
  reset_simcuda();
  auto instance = make_simcuda_allocator(core::cache_settings{});
  void* block = instance->allocate(6 * kMiB, 0, nullptr);
  fill_pattern(block, 6 * kMiB, 7);
  void* imported = instance->import_block(instance->export_block(block));
  instance->deallocate(block);
  instance->device(0).release_cache(0);  // the exporter's pages are unmapped and released
  CHECK(instance->device(0).stats().reserved_bytes[pool_all].current == 0);
  CHECK(check_pattern(imported, 6 * kMiB, 7));
  instance->close_imported_block(imported);
  instance->close_imported_block(imported);  // twice: ignored
}

TEST_CASE("stale, malformed and foreign handles are refused", "[ipc]") {
  reset_simcuda();
  auto instance = make_simcuda_allocator(core::cache_settings{});
  void* block = instance->allocate(3 * kMiB, 0, nullptr);
  const std::string handle = instance->export_block(block);
  instance->deallocate(block);  // its descriptors close
  // Reuse the freed descriptor numbers for other files: the handle must not open them.
  std::vector<int> others;
  for (int i = 0; i < 8; ++i) others.push_back(open("/dev/null", O_RDONLY));
  CHECK_THROWS_AS(instance->import_block(handle), error);
  for (int descriptor : others) close(descriptor);
  CHECK_THROWS_AS(instance->import_block("not a handle"), invalid_argument_error);
  CHECK_THROWS_AS(instance->import_block(handle.substr(0, handle.size() - 3)), invalid_argument_error);
  void* live = instance->allocate(3 * kMiB, 0, nullptr);
  CHECK_THROWS_AS(instance->export_block(static_cast<char*>(live) + 512), invalid_pointer_error);
  CHECK_THROWS_AS(instance->export_block(nullptr), invalid_pointer_error);
  CHECK_THROWS_AS(instance->record_stream(nullptr, nullptr), invalid_pointer_error);
  instance->deallocate(live);
}

TEST_CASE("the cudaMalloc backend shares through CUDA IPC handles", "[ipc]") {
  reset_simcuda();
  core::cache_settings settings;
  settings.conf.backend = fragless::backend_kind::cuda_malloc;
  auto instance = make_simcuda_allocator(settings);
  REQUIRE(std::string(instance->device(0).backend_name()) == "cudaMalloc");
  void* first = instance->allocate(3 * kMiB, 0, nullptr);
  void* block = instance->allocate(2 * kMiB, 0, nullptr);  // inside a segment, not at its start
  fill_pattern(block, 2 * kMiB, 9);
  void* opened = instance->import_block(instance->export_block(block));
  // simcuda opens IPC handles in the exporting process only, at the same address.
  CHECK(opened == block);
  CHECK(check_pattern(opened, 2 * kMiB, 9));
  instance->close_imported_block(opened);
  instance->deallocate(block);
  instance->deallocate(first);
}
