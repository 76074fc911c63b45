// atomic_file: outputs are written whole or not at all (temp file + rename), so a failed
// run never leaves a partial report behind.
#include "outputs.hpp"

#include <cstdio>
#include <stdexcept>
#include <unistd.h>

namespace fragless::bench {

void write_file_atomically(const std::string& path, const std::string& contents) {
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  std::FILE* file = std::fopen(temporary.c_str(), "wb");
  if (file == nullptr) throw std::runtime_error(path + ": cannot create output file");
  const bool written = std::fwrite(contents.data(), 1, contents.size(), file) == contents.size();
  const bool closed = std::fclose(file) == 0;
  if (!written || !closed || std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    throw std::runtime_error(path + ": write failed");
  }
}

}  // namespace fragless::bench
