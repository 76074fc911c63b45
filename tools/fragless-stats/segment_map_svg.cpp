// The SVG segment map; see segment_map.hpp. Layout: title, legend, then one row per
// segment: a label and a bar whose width is the segment's size on one linear scale (the
// largest segment spans the bar area; a bar is at least 2 px wide). Blocks are drawn as
// runs of equal state. Invariant: exactly one <g class="segment"> per segment.
#include <algorithm>
#include <cstdio>

#include "segment_map.hpp"
#include "fragless/options.hpp"
#include "xml_escape.hpp"

namespace fragless::cli {
namespace {

constexpr double label_width = 330;
constexpr double bar_area = 660;
constexpr double row_height = 18;
constexpr double bar_height = 12;
constexpr double top = 70;

std::string number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f", value);
  return buffer;
}

const char* state_class(block_state state) {
  switch (state) {
    case block_state::allocated: return "allocated";
    case block_state::pending_free: return "pending";
    case block_state::free: break;
  }
  return "free";
}

}  // namespace

std::string segment_map_svg(const memory_snapshot& snapshot, const std::string& title) {
  std::uint64_t largest = 1;
  for (const snapshot_segment& segment : snapshot.segments) largest = std::max(largest, segment.size_bytes);
  const double height = top + row_height * static_cast<double>(std::max<std::size_t>(snapshot.segments.size(), 1)) + 20;
  const double width = label_width + bar_area + 20;
  std::string out;
  out += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + number(width) + "\" height=\"" + number(height) +
         "\" viewBox=\"0 0 " + number(width) + " " + number(height) + "\" font-family=\"monospace\" font-size=\"11\">\n";
  out += "<style>.allocated{fill:#2563eb}.pending{fill:#f59e0b}.free{fill:#e5e7eb}"
         ".outline{fill:none;stroke:#6b7280;stroke-width:0.5}</style>\n";
  out += "<title>" + xml_escape(title) + "</title>\n";
  out += "<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">" + xml_escape(title) + "</text>\n";
  // Legend.
  out += "<g class=\"legend\">\n";
  double x = 10;
  for (const auto& [css, label] : {std::pair{"allocated", "allocated"}, std::pair{"pending", "pending free"},
                                   std::pair{"free", "free (cached)"}}) {
    out += "<rect class=\"" + std::string(css) + "\" x=\"" + number(x) + "\" y=\"34\" width=\"12\" height=\"12\"/>";
    out += "<text x=\"" + number(x + 16) + "\" y=\"44\">" + label + "</text>\n";
    x += 130;
  }
  out += "<text x=\"" + number(x) + "\" y=\"44\">bar width: segment size (largest = " +
         xml_escape(format_bytes_readable(static_cast<double>(largest))) + ")</text>\n";
  out += "</g>\n";

  double y = top;
  for (const std::size_t index : segment_order(snapshot)) {
    const snapshot_segment& segment = snapshot.segments[index];
    const double bar_width =
        std::max(2.0, bar_area * static_cast<double>(segment.size_bytes) / static_cast<double>(largest));
    const double scale = segment.size_bytes == 0 ? 0 : bar_width / static_cast<double>(segment.size_bytes);
    char label[200];
    std::snprintf(label, sizeof label, "dev %d 0x%012llx %s %s", segment.device,
                  static_cast<unsigned long long>(segment.address),
                  format_bytes_readable(static_cast<double>(segment.size_bytes)).c_str(),
                  segment.pool == pool_small ? "small" : "large");
    out += "<g class=\"segment\" data-device=\"" + std::to_string(segment.device) + "\" data-address=\"" +
           std::to_string(segment.address) + "\" data-size=\"" + std::to_string(segment.size_bytes) + "\">\n";
    out += "<text x=\"10\" y=\"" + number(y + bar_height - 2) + "\">" + xml_escape(label) + "</text>\n";
    // Runs of equal state.
    std::size_t b = 0;
    while (b < segment.blocks.size()) {
      const block_state state = segment.blocks[b].state;
      const std::uint64_t start = segment.blocks[b].address;
      std::uint64_t end = start + segment.blocks[b].size_bytes;
      std::size_t count = 1;
      while (b + count < segment.blocks.size() && segment.blocks[b + count].state == state) {
        end = segment.blocks[b + count].address + segment.blocks[b + count].size_bytes;
        ++count;
      }
      const double offset = static_cast<double>(start >= segment.address ? start - segment.address : 0) * scale;
      const double run_width = std::max(0.0, static_cast<double>(end - start) * scale);
      out += "<rect class=\"" + std::string(state_class(state)) + "\" x=\"" + number(label_width + offset) +
             "\" y=\"" + number(y) + "\" width=\"" + number(run_width) + "\" height=\"" + number(bar_height) +
             "\"><title>" + std::to_string(count) + " " + state_class(state) + " block(s), " +
             xml_escape(format_bytes_readable(static_cast<double>(end - start))) + "</title></rect>\n";
      b += count;
    }
    out += "<rect class=\"outline\" x=\"" + number(label_width) + "\" y=\"" + number(y) + "\" width=\"" +
           number(bar_width) + "\" height=\"" + number(bar_height) + "\"/>\n";
    out += "</g>\n";
    y += row_height;
  }
  if (snapshot.segments.empty())
    out += "<text x=\"10\" y=\"" + number(top + 12) + "\">(no segments)</text>\n";
  out += "</svg>\n";
  return out;
}

}  // namespace fragless::cli
