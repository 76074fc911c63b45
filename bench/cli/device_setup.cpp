// device_setup: see header and Note [Capacity on a real GPU].
#include "device_setup.hpp"

#include "bench_options.hpp"
#include "child_runner.hpp"
#include "replay/device_counters.hpp"

#include "fragless/options.hpp"

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

#ifndef FRAGLESS_BENCH_COUNTING_FROM_BINDIR
#define FRAGLESS_BENCH_COUNTING_FROM_BINDIR "../lib"
#endif

extern char** environ;

namespace fragless::bench {

namespace {

constexpr std::uint64_t default_fit_capacity_bytes = std::uint64_t{24} << 30;
constexpr const char* counting_library_name = "libfragless_bench_counting.so";

std::string program_directory() {
  char buffer[4096];
  const ssize_t length = ::readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  if (length <= 0) return ".";
  buffer[length] = '\0';
  return std::filesystem::path(buffer).parent_path().string();
}

// FRAGLESS_BENCH_COUNTING_LIBRARY, else beside the program (build tree), else the install's
// library directory.
std::string find_counting_library() {
  if (const char* path = std::getenv("FRAGLESS_BENCH_COUNTING_LIBRARY"); path != nullptr && *path != '\0') {
    return std::filesystem::exists(path) ? std::string(path) : std::string();
  }
  const std::filesystem::path directory = program_directory();
  for (const std::filesystem::path& candidate :
       {directory / counting_library_name, directory / FRAGLESS_BENCH_COUNTING_FROM_BINDIR / counting_library_name}) {
    std::error_code error;
    if (std::filesystem::exists(candidate, error)) return std::filesystem::weakly_canonical(candidate, error).string();
  }
  return {};
}

struct probed_device {
  std::string name;
  std::uint64_t total_bytes = 0;
};

// cudaGetDeviceProperties + cudaMemGetInfo in a child (`fragless-bench device-info`).
probed_device probe_device(bool verbose) {
  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) environment.emplace_back(*entry);
  const self_run run = run_self({"fragless-bench", "device-info"}, environment, verbose);
  std::istringstream lines(run.output);
  std::string line, error;
  bool ok = false;
  probed_device device;
  while (std::getline(lines, line)) {
    const std::size_t tab = line.find('\t');
    if (tab == std::string::npos) continue;
    const std::string key = line.substr(0, tab), value = line.substr(tab + 1);
    if (key == "ok") ok = value == "1";
    else if (key == "name") device.name = value;
    else if (key == "total_bytes") device.total_bytes = std::strtoull(value.c_str(), nullptr, 10);
    else if (key == "error") error = value;
  }
  if (!ok || device.total_bytes == 0) {
    throw std::runtime_error("no CUDA device answered (" + (error.empty() ? run.status : error) +
                             ") and simcuda is not loaded (run through scripts/with-simcuda to use it)");
  }
  return device;
}

std::string size_text(std::uint64_t bytes) { return format_bytes_readable(bytes); }

}  // namespace

device_setup prepare_device(const bench_options& options) {
  device_setup setup;
  const std::string requested = device_counters::requested_source();
  const bool simcuda_loaded = device_counters::simcuda_control_loaded();
  if (requested == "simcuda" && !simcuda_loaded) {
    throw std::invalid_argument("FRAGLESS_BENCH_COUNTING=simcuda, but simcuda is not loaded");
  }
  setup.simulated = simcuda_loaded && requested != "interposer";
  const char* device_line = std::getenv("FRAGLESS_BENCH_DEVICE");
  if (setup.simulated) {
    setup.device_line = "simcuda (host-memory emulation, no GPU)";
    setup.counting_line = "device calls counted by simcuda; bytes in use are simcuda's";
    const std::uint64_t fit = options.capacity_bytes.value_or(default_fit_capacity_bytes);
    setup.capacity_line = (options.capacity_bytes ? size_text(*options.capacity_bytes) + " (--capacity, set in simcuda)"
                                                  : std::string("simcuda's device size (SIMCUDA_MEMORY, default 80 GiB)")) +
                          "; the max batch is searched at " + size_text(fit);
  } else {
    const probed_device device = probe_device(options.verbose);
    setup.device_total_bytes = device.total_bytes;
    setup.device_line = simcuda_loaded ? "simcuda driven as a real GPU (FRAGLESS_BENCH_COUNTING=interposer)"
                                       : "real GPU (" + device.name + ")";
    setup.counting_library = find_counting_library();
    if (setup.counting_library.empty()) {
      std::cerr << "fragless-bench: warning: " << counting_library_name
                << " not found: device calls are not counted (FRAGLESS_BENCH_COUNTING_LIBRARY names it)\n";
      setup.counting_line = "device calls not counted (no counting library); bytes in use from cudaMemGetInfo";
    } else {
      setup.counting_line = std::string("device calls counted by ") + counting_library_name +
                            " (LD_PRELOAD); bytes in use are cudaMemGetInfo's total - free, the whole device's";
    }
    setup.capacity_line = "the device's memory, " + size_text(device.total_bytes) +
                          " (cudaMemGetInfo total; a GPU's capacity cannot be set); the max batch is searched at it";
    if (options.capacity_bytes && *options.capacity_bytes != device.total_bytes) {
      throw std::invalid_argument(
          "--capacity " + size_text(*options.capacity_bytes) + " is " +
          (*options.capacity_bytes > device.total_bytes ? "more" : "less") + " than the device's memory (" +
          size_text(device.total_bytes) + "): a real GPU's capacity cannot be set; --capacity works on simcuda only");
    }
    if (options.device_call_ns != 0) {
      throw std::invalid_argument("--device-call-ns is simcuda-only: on a real GPU every device call costs what it costs");
    }
  }
  if (device_line != nullptr && *device_line != '\0') setup.device_line = device_line;
  return setup;
}

std::uint64_t fit_capacity_to_set(const bench_options& options) {
  if (!options.device.simulated) return 0;  // Note [Capacity on a real GPU]
  return options.capacity_bytes.value_or(default_fit_capacity_bytes);
}

}  // namespace fragless::bench
