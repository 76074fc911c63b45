// The median of a list of figures, for the benchmark's reports and calibration: the middle
// value, or the mean of the two middle ones. Invariant: 0 for an empty list.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace fragless::bench {

inline double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return (values[(n - 1) / 2] + values[n / 2]) / 2;
}

}  // namespace fragless::bench
