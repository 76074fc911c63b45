// Test support. `summary_dump SEED`: prints the stats JSON and memory_summary of a
// pseudo-random device_stats, separated by a line "----", for
// compare_summary_with_torch.py. `summary_dump --snapshot-pickle`: writes a hand-built
// snapshot (two devices, every block state, a 2^64-range address) as a PyTorch pickle to
// stdout, for check_pickle_with_memory_viz.py.
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string_view>

#include "fragless/stats.hpp"
#include "fragless/stats_snapshot.hpp"

namespace {

int write_snapshot_pickle() {
  using namespace fragless;
  memory_snapshot s;
  s.device_count = 2;
  const std::uint64_t mib = 1 << 20, a = 0x7f2000000000ull;
  s.segments.push_back({0, a, 2 * mib, 0, pool_small, false,
                        {{a, mib, 1000, block_state::allocated}, {a + mib, mib, 0, block_state::free}}});
  s.segments.push_back({0, a + 64 * mib, 40 * mib, 0x55aa, pool_large, true,
                        {{a + 64 * mib, 8 * mib, 7 * mib, block_state::allocated},
                         {a + 72 * mib, 4 * mib, 0, block_state::pending_free},
                         {a + 76 * mib, 28 * mib, 0, block_state::free}}});
  const std::uint64_t high = 0xfffff00000000000ull;
  s.segments.push_back({1, high, 20 * mib, 0, pool_large, false, {{high, 20 * mib, 20 * mib, block_state::allocated}}});
  const std::string bytes = to_pytorch_pickle(s);
  return std::fwrite(bytes.data(), 1, bytes.size(), stdout) == bytes.size() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace fragless;
  if (argc > 1 && std::string_view(argv[1]) == "--snapshot-pickle") return write_snapshot_pickle();
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
