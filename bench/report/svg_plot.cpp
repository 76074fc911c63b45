// svg_plot: reserved and live bytes over each trace, one panel per trace, one line per
// allocator, axes in GiB, a legend and titles: a plot a person can read without the table.
// Invariant: every allocator keeps one colour across all panels.
#include "outputs.hpp"

#include "xml_escape.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace fragless::bench {

namespace {

constexpr const char* palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                   "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"};

std::string num(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", v);
  return buffer;
}

// A "nice" tick step (1, 2, 5 x 10^k) giving about `target` ticks over [0, max].
double tick_step(double max, int target) {
  const double raw = max / target;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= m * magnitude) return m * magnitude;
  }
  return 10.0 * magnitude;
}

}  // namespace

std::string format_svg_plot(const std::vector<result_row>& rows, const std::string& title) {
  std::vector<std::string> traces;
  std::vector<std::string> allocators;
  for (const result_row& row : rows) {
    if (row.timeline.empty()) continue;
    if (std::find(traces.begin(), traces.end(), row.trace) == traces.end()) traces.push_back(row.trace);
    if (std::find(allocators.begin(), allocators.end(), row.allocator) == allocators.end()) {
      allocators.push_back(row.allocator);
    }
  }
  const int columns = traces.size() > 1 ? 2 : 1;
  const double panel_width = 620, panel_height = 320;
  const double left = 70, right = 20, top = 40, bottom = 45;
  const int panel_rows = static_cast<int>((traces.size() + static_cast<std::size_t>(columns) - 1) / static_cast<std::size_t>(columns));
  const double width = panel_width * columns;
  const double gib = 1024.0 * 1024.0 * 1024.0;

  // Legend items, wrapped onto as many rows as the width needs.
  struct legend_entry {
    std::string label, colour;
    const char* dash;
  };
  std::vector<legend_entry> legend{{"live bytes", "black", "5,3"}, {"ideal", "#999999", "2,2"}};
  for (std::size_t a = 0; a < allocators.size(); ++a)
    legend.push_back({allocators[a] + " reserved", palette[a % std::size(palette)], nullptr});
  auto entry_width = [](const legend_entry& entry) { return 40 + 7.0 * static_cast<double>(entry.label.size()); };
  int legend_rows = 1;
  for (double x = 20; const legend_entry& entry : legend) {
    if (x + entry_width(entry) > width - 10 && x > 20) {
      ++legend_rows;
      x = 20;
    }
    x += entry_width(entry);
  }
  const double header = 52 + 18.0 * legend_rows;
  const double height = header + panel_height * std::max(1, panel_rows);

  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width) + "\" height=\"" + num(height) +
                    "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + num(width / 2) + "\" y=\"24\" text-anchor=\"middle\" font-size=\"18\">" + xml_escape(title) + "</text>\n";
  double legend_x = 20, legend_y = 50;
  for (const legend_entry& entry : legend) {
    if (legend_x + entry_width(entry) > width - 10 && legend_x > 20) {
      legend_x = 20;
      legend_y += 18;
    }
    svg += "<line x1=\"" + num(legend_x) + "\" y1=\"" + num(legend_y) + "\" x2=\"" + num(legend_x + 24) + "\" y2=\"" +
           num(legend_y) + "\" stroke=\"" + entry.colour + "\" stroke-width=\"2\"" +
           (entry.dash != nullptr ? std::string(" stroke-dasharray=\"") + entry.dash + "\"" : "") + "/>\n";
    svg += "<text x=\"" + num(legend_x + 30) + "\" y=\"" + num(legend_y + 4) + "\">" + xml_escape(entry.label) + "</text>\n";
    legend_x += entry_width(entry);
  }

  for (std::size_t p = 0; p < traces.size(); ++p) {
    const double origin_x = panel_width * static_cast<double>(p % static_cast<std::size_t>(columns));
    const double origin_y = header + panel_height * static_cast<double>(p / static_cast<std::size_t>(columns));
    const double plot_x = origin_x + left, plot_y = origin_y + top;
    const double plot_w = panel_width - left - right, plot_h = panel_height - top - bottom;
    double max_bytes = 1, max_event = 1, ideal = 0;
    const std::vector<timeline_point>* live_line = nullptr;
    for (const result_row& row : rows) {
      if (row.trace != traces[p] || row.timeline.empty()) continue;
      if (live_line == nullptr && row.allocator != "pytorch-recorded") live_line = &row.timeline;
      if (row.ideal_bytes) ideal = *row.ideal_bytes;
      for (const timeline_point& point : row.timeline) {
        max_bytes = std::max({max_bytes, static_cast<double>(point.reserved_bytes), static_cast<double>(point.live_bytes)});
        max_event = std::max(max_event, static_cast<double>(point.event));
      }
    }
    max_bytes = std::max(max_bytes, ideal) * 1.05;
    auto x_of = [&](double event) { return plot_x + plot_w * event / max_event; };
    auto y_of = [&](double bytes) { return plot_y + plot_h - plot_h * bytes / max_bytes; };

    svg += "<text x=\"" + num(origin_x + panel_width / 2) + "\" y=\"" + num(origin_y + 22) +
           "\" text-anchor=\"middle\" font-size=\"14\">" + xml_escape(traces[p]) + "</text>\n";
    svg += "<rect x=\"" + num(plot_x) + "\" y=\"" + num(plot_y) + "\" width=\"" + num(plot_w) + "\" height=\"" +
           num(plot_h) + "\" fill=\"none\" stroke=\"#444\"/>\n";
    const double step = tick_step(max_bytes / gib, 5);
    for (double tick = 0; tick <= max_bytes / gib + 1e-12; tick += step) {
      const double y = y_of(tick * gib);
      svg += "<line x1=\"" + num(plot_x) + "\" y1=\"" + num(y) + "\" x2=\"" + num(plot_x + plot_w) + "\" y2=\"" + num(y) +
             "\" stroke=\"#e0e0e0\"/>\n";
      char label[32];
      const int decimals = std::clamp(static_cast<int>(-std::floor(std::log10(step))), 1, 6);
      std::snprintf(label, sizeof label, "%.*f", decimals, tick);
      svg += "<text x=\"" + num(plot_x - 6) + "\" y=\"" + num(y + 4) + "\" text-anchor=\"end\">" + label + "</text>\n";
    }
    svg += "<text transform=\"translate(" + num(origin_x + 16) + "," + num(plot_y + plot_h / 2) +
           ") rotate(-90)\" text-anchor=\"middle\">GiB</text>\n";
    svg += "<text x=\"" + num(plot_x + plot_w / 2) + "\" y=\"" + num(plot_y + plot_h + 32) +
           "\" text-anchor=\"middle\">trace event (0 to " + num(max_event).substr(0, num(max_event).size() - 2) + ")</text>\n";
    auto polyline = [&](const std::vector<timeline_point>& points, bool live, const std::string& colour, const char* dash) {
      std::string path;
      double previous_y = -1;
      for (const timeline_point& point : points) {
        const double y = y_of(static_cast<double>(live ? point.live_bytes : point.reserved_bytes));
        const double x = x_of(static_cast<double>(point.event));
        if (previous_y >= 0) path += num(x) + "," + num(previous_y) + " ";  // step shape
        path += num(x) + "," + num(y) + " ";
        previous_y = y;
      }
      svg += "<polyline fill=\"none\" stroke=\"" + colour + "\" stroke-width=\"1.5\"" +
             (dash != nullptr ? std::string(" stroke-dasharray=\"") + dash + "\"" : "") + " points=\"" + path + "\"/>\n";
    };
    if (ideal > 0) {
      svg += "<line x1=\"" + num(plot_x) + "\" y1=\"" + num(y_of(ideal)) + "\" x2=\"" + num(plot_x + plot_w) + "\" y2=\"" +
             num(y_of(ideal)) + "\" stroke=\"#999999\" stroke-dasharray=\"2,2\"/>\n";
    }
    for (std::size_t a = 0; a < allocators.size(); ++a) {
      for (const result_row& row : rows) {
        if (row.trace == traces[p] && row.allocator == allocators[a] && !row.timeline.empty()) {
          polyline(row.timeline, false, palette[a % std::size(palette)], nullptr);
        }
      }
    }
    if (live_line != nullptr) polyline(*live_line, true, "black", "5,3");
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace fragless::bench
