// libFuzzer harness: the data-only pickle reader and the snapshot reader on top of it must
// reject or accept any byte string without crashing, leaking or reading out of bounds.
#include "pickle_reader.hpp"
#include "traces/snapshot_reader.hpp"

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  fragless::traces::pickle_limits limits;
  limits.max_values = 1 << 16;
  limits.max_text_bytes = 1 << 20;
  try {
    (void)fragless::traces::read_pickle(input, limits);
  } catch (const std::exception&) {
  }
  try {
    (void)fragless::traces::read_snapshot(input, "fuzz");
  } catch (const std::exception&) {
  }
  return 0;
}
