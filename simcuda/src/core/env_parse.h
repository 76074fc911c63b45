// Parsing of simcuda's environment variables (SIMCUDA_MEMORY, SIMCUDA_FAIL, ...).
// Invariant: a malformed value warns on stderr and leaves the caller's default in place;
// nothing here aborts the host program.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace simcuda {

// "80GiB", "512MiB", "4096", "1KiB" (also KB/MB/GB, K/M/G as binary units).
std::optional<uint64_t> parse_bytes(std::string_view text);
std::optional<uint64_t> parse_unsigned(std::string_view text);
// Splits on `separator`, dropping empty pieces.
std::vector<std::string_view> split(std::string_view text, char separator);
// Reads an environment variable; nullopt when unset or empty.
std::optional<std::string> env_string(const char* name);
void warn(const std::string& message);

}  // namespace simcuda
