// simcuda's libraries export what a binary linked against the real CUDA libraries needs:
// every libcudart.so.13 function in the libcudart.so.13 version node, the driver API
// unversioned from libcuda.so.1, and nothing of their internals; and no entry point keeps its
// lookups in a guarded static (Note [No guarded statics on entry]).
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "simcuda_test_support.h"

namespace {

// The lines `nm ARGUMENTS 'library'` prints.
std::vector<std::string> nm_lines(const std::string& arguments, const std::string& library) {
  std::vector<std::string> lines;
  std::string command = "nm " + arguments + " '" + library + "' 2>/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string line;
  char chunk[1024];
  while (std::fgets(chunk, sizeof chunk, pipe) != nullptr) {
    line += chunk;  // a demangled name may be longer than a chunk
    if (line.back() == '\n') lines.push_back(std::move(line)), line.clear();
  }
  if (!line.empty()) lines.push_back(std::move(line));
  pclose(pipe);
  return lines;
}

// "name@@version" / "name" for every defined dynamic function symbol of a library.
std::set<std::string> exported_functions(const std::string& library) {
  std::set<std::string> names;
  for (const std::string& line : nm_lines("-D --defined-only", library)) {
    char address[64], type[8], name[400];
    if (std::sscanf(line.c_str(), "%63s %7s %399s", address, type, name) == 3 && (type[0] == 'T' || type[0] == 'W'))
      names.insert(name);
  }
  return names;
}

std::string strip_version(const std::string& name) { return name.substr(0, name.find('@')); }

// The demangled names of a library's guard variables (function-local statics with a dynamic
// initializer), from its full symbol table.
std::vector<std::string> guard_variables(const std::string& library) {
  std::vector<std::string> names;
  const std::string marker = "guard variable for ";
  for (const std::string& line : nm_lines("-C", library)) {
    const std::size_t at = line.find(marker);
    if (at != std::string::npos) names.push_back(line.substr(at + marker.size()));
  }
  return names;
}

}  // namespace

TEST_CASE("libcudart.so.13 exports the runtime API in the libcudart.so.13 version node") {
  auto names = exported_functions(SIMCUDA_RUNTIME_LIBRARY);
  REQUIRE(!names.empty());
  CHECK(names.count("cudaMalloc@@libcudart.so.13") == 1);
  CHECK(names.count("cudaGetDriverEntryPointByVersion@@libcudart.so.13") == 1);
  CHECK(names.count("__cudaRegisterFatBinary@@libcudart.so.13") == 1);
  for (const std::string& name : names) {
    INFO(name);
    CHECK(name.find("@@libcudart.so.13") != std::string::npos);
    CHECK((name.rfind("cuda", 0) == 0 || name.rfind("__cuda", 0) == 0));
  }
  // Every function of the real library is there (when the real library is installed).
  auto real = exported_functions(SIMCUDA_REAL_RUNTIME_LIBRARY);
  for (const std::string& name : real) {
    INFO(name);
    CHECK(names.count(name) == 1);
  }
}

TEST_CASE("libcuda.so.1 exports the driver API unversioned, and the simcuda control API") {
  auto names = exported_functions(SIMCUDA_DRIVER_LIBRARY);
  REQUIRE(!names.empty());
  for (const char* expected : {"cuMemMap", "cuMemCreate", "cuGetProcAddress_v2", "cuMemAlloc_v2", "simcuda_launch",
                               "simcuda_race_count", "simcuda_fail"})
    CHECK(names.count(expected) == 1);
  for (const std::string& name : names) {
    INFO(name);
    CHECK(name.find('@') == std::string::npos);
    CHECK((name.rfind("cu", 0) == 0 || name.rfind("simcuda_", 0) == 0));
  }
  auto real = exported_functions(SIMCUDA_REAL_DRIVER_STUB);
  for (const std::string& name : real) {
    INFO(name);
    CHECK(names.count(strip_version(name)) == 1);
  }
}

// Note [No guarded statics on entry]: a child forked while a parent thread ran an entry
// point's first call would wait for ever on a guarded lookup. The libraries keep their
// symbol tables in the test builds; a guard variable shows there.
TEST_CASE("no entry point caches its lookups in a guarded static") {
  for (const char* library : {SIMCUDA_RUNTIME_LIBRARY, SIMCUDA_DRIVER_LIBRARY, SIMCUDA_NVML_LIBRARY}) {
    INFO(library);
    REQUIRE(!exported_functions(library).empty());
    for (const std::string& guarded : guard_variables(library)) {
      INFO(guarded);
      CHECK(guarded.find("simcuda_name_index_") == std::string::npos);
      CHECK(guarded.find("simcuda_driver_fn_") == std::string::npos);
    }
  }
}
