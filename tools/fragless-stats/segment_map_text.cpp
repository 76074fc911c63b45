// The text segment map; see segment_map.hpp.
#include <algorithm>
#include <cstdio>
#include <numeric>

#include "segment_map.hpp"
#include "fragless/options.hpp"

namespace fragless::cli {

std::vector<std::size_t> segment_order(const memory_snapshot& snapshot) {
  std::vector<std::size_t> order(snapshot.segments.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const auto& x = snapshot.segments[a];
    const auto& y = snapshot.segments[b];
    return x.device != y.device ? x.device < y.device : x.address < y.address;
  });
  return order;
}

std::string segment_map_text(const memory_snapshot& snapshot, const style& look, int bar_cells) {
  std::string out;
  out += "Segment map ('#' allocated, '+' pending free, '.' free; " + std::to_string(bar_cells) +
         " cells per segment)\n";
  const auto cells = static_cast<std::size_t>(std::max(bar_cells, 1));
  for (const std::size_t index : segment_order(snapshot)) {
    const snapshot_segment& segment = snapshot.segments[index];
    // 0 free, 1 pending, 2 allocated: the highest state touching each cell.
    std::vector<int> rank(cells, 0);
    std::uint64_t allocated = 0, pending = 0;
    for (const snapshot_block& block : segment.blocks) {
      const int value = block.state == block_state::allocated ? 2 : block.state == block_state::pending_free ? 1 : 0;
      if (block.state == block_state::allocated) allocated += block.size_bytes;
      if (block.state == block_state::pending_free) pending += block.size_bytes;
      if (value == 0 || segment.size_bytes == 0 || block.size_bytes == 0) continue;
      const long double scale = static_cast<long double>(cells) / static_cast<long double>(segment.size_bytes);
      const auto offset = block.address >= segment.address ? block.address - segment.address : 0;
      auto first = static_cast<std::size_t>(static_cast<long double>(offset) * scale);
      auto last = static_cast<std::size_t>(static_cast<long double>(offset + block.size_bytes - 1) * scale);
      first = std::min(first, cells - 1);
      last = std::min(last, cells - 1);
      for (std::size_t c = first; c <= last; ++c) rank[c] = std::max(rank[c], value);
    }
    std::string bar;
    for (int r : rank) bar += r == 2 ? '#' : r == 1 ? '+' : '.';
    char head[160];
    std::snprintf(head, sizeof head, "dev %d  0x%012llx  %11s  %-5s  stream 0x%llx%s  ", segment.device,
                  static_cast<unsigned long long>(segment.address),
                  format_bytes_readable(static_cast<double>(segment.size_bytes)).c_str(),
                  segment.pool == pool_small ? "small" : "large", static_cast<unsigned long long>(segment.stream),
                  segment.is_expandable ? " (expandable)" : "");
    const std::uint64_t free_bytes = segment.size_bytes - std::min(segment.size_bytes, allocated + pending);
    out += head;
    out += look.bold("|" + bar + "|");
    out += "  " + std::to_string(segment.blocks.size()) + " blocks, allocated " +
           format_bytes_readable(static_cast<double>(allocated)) + ", free " + format_bytes_readable(static_cast<double>(free_bytes)) + "\n";
  }
  if (snapshot.segments.empty()) out += "(no segments)\n";
  return out;
}

}  // namespace fragless::cli
