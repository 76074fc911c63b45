// runtime_directory: a private XDG_RUNTIME_DIR for one test -- a fresh directory under /tmp
// where stats pages (and the snapshots tests write) go -- removed with its contents when the
// test ends. Invariant: while it lives, XDG_RUNTIME_DIR names `root`.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace fragless::testing {

struct runtime_directory {
  std::string root;
  runtime_directory() {
    char pattern[] = "/tmp/fragless-test-XXXXXX";
    const char* made = ::mkdtemp(pattern);
    if (made != nullptr) root = made;
    ::setenv("XDG_RUNTIME_DIR", root.c_str(), 1);
  }
  ~runtime_directory() {
    std::error_code ignored;
    if (!root.empty()) std::filesystem::remove_all(root, ignored);
  }
  runtime_directory(const runtime_directory&) = delete;
  runtime_directory& operator=(const runtime_directory&) = delete;
  // The stats directory inside it, and this process's page there.
  std::string stats_dir() const { return root + "/fragless"; }
  std::string page_path() const { return stats_dir() + "/" + std::to_string(::getpid()) + ".stats"; }
};

}  // namespace fragless::testing
