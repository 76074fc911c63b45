// libFuzzer harness: the cost-table parser must take any text without throwing or
// crashing, and leave every priced function with at least one non-negative price
// (cost_table.hpp's invariant: bad lines warn, the defaults fill in).
#include "cost/cost_table.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace fragless::bench;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> warnings;
  cost_table table;
  try {
    table = parse_cost_table(input, "fuzz", warnings);
  } catch (...) {
    std::abort();
  }
  for (std::size_t f = 0; f < costed_function_count; ++f) {
    if (table.points[f].empty()) std::abort();
    if (!(table.price_ns(f, std::uint64_t{2} << 20) >= 0)) std::abort();
  }
  return 0;
}
