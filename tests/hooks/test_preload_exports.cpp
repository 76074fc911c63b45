// Checks libfragless_preload.so from the outside: it exports only the interposed CUDA
// functions and fragless's C API (no spdlog, fmt or C++ standard library symbols), and a
// program run under it with a bad FRAGLESS_CONF warns and keeps running on defaults.
#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <memory>
#include <regex>
#include <sstream>
#include <string>

namespace {

std::string run(const std::string& command) {
  std::array<char, 4096> buffer{};
  std::string output;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen((command + " 2>&1").c_str(), "r"), pclose);
  REQUIRE(pipe);
  while (fgets(buffer.data(), buffer.size(), pipe.get()) != nullptr) output += buffer.data();
  return output;
}

}  // namespace

TEST_CASE("libfragless_preload.so exports only CUDA interposers and the fragless C API", "[preload][exports]") {
  const std::string symbols = run("nm -D --defined-only " FRAGLESS_PRELOAD_PATH);
  REQUIRE_FALSE(symbols.empty());
  std::istringstream lines(symbols);
  std::string line;
  int exported = 0;
  const std::regex allowed(R"(^[0-9a-f]+ [TWV] (cuda[A-Za-z]+|cu[A-Z][A-Za-z_0-9]+|fragless_[a-z_]+)(@@?[A-Za-z0-9_.]+)?$)");
  while (std::getline(lines, line)) {
    if (line.find(" A ") != std::string::npos) continue;  // version node names
    INFO(line);
    CHECK(std::regex_match(line, allowed));
    CHECK(line.find("spdlog") == std::string::npos);
    CHECK(line.find("fmt") == std::string::npos);
    CHECK(line.find("_Z") == std::string::npos);  // no C++ (mangled) symbol at all
    ++exported;
  }
  CHECK(exported > 10);
  CHECK(symbols.find("cudaMalloc@@libcudart.so.13") != std::string::npos);
  CHECK(symbols.find("fragless_malloc") != std::string::npos);
}

TEST_CASE("a bad FRAGLESS_CONF warns and the preloaded program runs on defaults", "[preload][conf]") {
  const std::string output = run("env FRAGLESS_CONF=no_such_key:1,max_cached_bytes:lots LD_PRELOAD=" FRAGLESS_PRELOAD_PATH
                                 " " FRAGLESS_PRELOAD_PROGRAM);
  INFO(output);
  CHECK(output.find("no_such_key") != std::string::npos);
  CHECK(output.find("max_cached_bytes") != std::string::npos);
  CHECK(output.find("preload program: ok") != std::string::npos);
}

TEST_CASE("FRAGLESS_PASSTHROUGH=1 forwards everything to the real runtime", "[preload][passthrough]") {
  const std::string output =
      run("env FRAGLESS_PASSTHROUGH=1 LD_PRELOAD=" FRAGLESS_PRELOAD_PATH " " FRAGLESS_PRELOAD_PROGRAM " --expect-passthrough");
  INFO(output);
  CHECK(output.find("preload program: ok") != std::string::npos);
}
