// libFuzzer harness: the RMM CSV, lifetime CSV and text trace readers must reject or accept
// any text without crashing; whatever they accept passes validate_trace and round-trips.
#include "traces/csv_readers.hpp"
#include "traces/text_trace.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  using namespace fragless::traces;
  try {
    (void)read_rmm_csv(input, "fuzz");
  } catch (const std::exception&) {
  }
  try {
    (void)read_lifetime_csv(input, "fuzz");
  } catch (const std::exception&) {
  }
  try {
    const trace t = read_text_trace(input, "fuzz");
    validate_trace(t);
    const trace back = read_text_trace(write_text_trace(t), "fuzz");
    if (back.events.size() != t.events.size()) std::abort();
  } catch (const std::exception&) {
  }
  return 0;
}
