// A figure as text with a fixed number of decimals, for the benchmark's markdown tables.
// Invariant: a value that is not finite reads "-".
#pragma once

#include <cmath>
#include <cstdio>
#include <string>

namespace fragless::bench {

inline std::string fixed(double value, int digits) {
  if (!std::isfinite(value)) return "-";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, value);
  return buffer;
}

}  // namespace fragless::bench
