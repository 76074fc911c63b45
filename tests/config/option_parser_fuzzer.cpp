// libFuzzer harness for the FRAGLESS_CONF parser: any bytes in, no crash, no exception,
// and the result survives a round trip through to_conf_string.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "fragless/options.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const fragless::options parsed = fragless::parse_options(input, [](std::string_view) {});
  bool clean = true;
  const fragless::options again =
      fragless::parse_options(fragless::to_conf_string(parsed), [&](std::string_view) { clean = false; });
  if (!clean || !(again == parsed)) std::abort();
  return 0;
}
