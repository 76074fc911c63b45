// Reading snapshot files for `show` and `map`: fragless JSON ("fragless.snapshot/1") or a
// PyTorch snapshot pickle (torch.cuda.memory._dump_snapshot), read with the data-only
// pickle reader. Invariant: nothing in a file is executed; a malformed file gives one
// error line and false.
#pragma once

#include <string>

#include "fragless/stats_snapshot.hpp"

namespace fragless::cli {

// `format` receives "fragless JSON" or "PyTorch pickle".
bool load_snapshot_file(const std::string& path, memory_snapshot& snapshot, std::string& format, std::string& error);
// Same, from bytes already read; `name` for messages.
bool load_snapshot_bytes(const std::string& bytes, const std::string& name, memory_snapshot& snapshot,
                         std::string& format, std::string& error);

}  // namespace fragless::cli
