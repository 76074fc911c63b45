// The median of a list of figures, for the benchmark's reports and calibration: the middle
// value, or the mean of the two middle ones; and a nearest-rank percentile. Invariant: 0
// for an empty list.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace fragless::bench {

inline double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return (values[(n - 1) / 2] + values[n / 2]) / 2;
}

// The nearest-rank percentile (0 < fraction <= 1): the smallest value with at least that
// fraction of the list at or below it.
inline double percentile(std::vector<double> values, double fraction) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<std::size_t>(std::ceil(fraction * static_cast<double>(values.size())));
  return values[std::max<std::size_t>(rank, 1) - 1];
}

}  // namespace fragless::bench
