// Prints the stats JSON and memory_summary of a pseudo-random device_stats (seed from
// argv[1]), separated by a line "----", for compare_summary_with_torch.py.
#include <cstdio>
#include <cstdlib>
#include <random>

#include "fragless/stats.hpp"

int main(int argc, char** argv) {
  using namespace fragless;
  std::mt19937_64 random(argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1);
  device_stats stats{};
  // Magnitudes from bytes to petabytes and counts to billions, so every unit is exercised.
  const auto magnitude = [&] {
    const int shift = static_cast<int>(random() % 52);
    return static_cast<std::int64_t>(random() % (std::uint64_t{1} << shift));
  };
  for (const stat_value& v : flatten(stats)) set_flat_value(stats, v.key, magnitude());
  const int device = static_cast<int>(random() % 8);
  std::printf("%s----\n%s", to_json(stats, device).c_str(), memory_summary(stats, device).c_str());
  return 0;
}
