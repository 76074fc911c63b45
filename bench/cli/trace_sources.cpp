// trace_sources: see header.
#include "trace_sources.hpp"

#include "traces/text_trace.hpp"
#include "workloads/corpus.hpp"
#include "workloads/workload.hpp"

#include <algorithm>
#include <filesystem>

#ifndef FRAGLESS_SOURCE_DIR
#define FRAGLESS_SOURCE_DIR "."
#endif

namespace fragless::bench {

namespace fs = std::filesystem;

traces::trace load_source(const std::string& source) {
  if (source.rfind("file:", 0) == 0) {
    const std::string path = source.substr(5);
    return traces::load_trace_file(path, path);
  }
  if (source.rfind("builtin:", 0) == 0) return generate_workload(parse_workload_spec(source.substr(8)));
  if (is_corpus_source(source)) return generate_corpus_source(source);
  throw traces::trace_error("unknown source '" + source + "'");
}

std::string default_traces_dir() {
  return (fs::path(FRAGLESS_SOURCE_DIR) / ".." / "shared" / "traces").lexically_normal().string();
}

std::vector<std::string> list_trace_files(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code error;
  for (fs::recursive_directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    if (!it->is_regular_file()) continue;
    const std::string extension = it->path().extension().string();
    if (extension == ".pickle" || extension == ".csv" || extension == ".trace") files.push_back(it->path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string display_name(const std::string& path, const std::string& dir) {
  if (dir.empty()) return path;
  const fs::path relative = fs::path(path).lexically_relative(fs::path(dir));
  const std::string text = relative.string();
  if (text.empty() || text.rfind("..", 0) == 0) return path;
  return text;
}

}  // namespace fragless::bench
