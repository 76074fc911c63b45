// Segment maps of a snapshot: a text map (one line per segment, a bar of cells marked by
// block state) and an SVG drawing (one bar per segment, blocks coloured by state,
// address-ordered, widths to scale). Invariant: segments appear in (device, address)
// order in both, so the two maps line up.
#pragma once

#include <string>

#include "cli_support.hpp"
#include "fragless/stats_snapshot.hpp"

namespace fragless::cli {

// Cell marks: '#' allocated, '+' pending free, '.' free (a cell shows the "busiest" state
// of any byte in it).
std::string segment_map_text(const memory_snapshot& snapshot, const style& look, int bar_cells = 64);
std::string segment_map_svg(const memory_snapshot& snapshot, const std::string& title);

// Segment indices sorted by (device, address).
std::vector<std::size_t> segment_order(const memory_snapshot& snapshot);

}  // namespace fragless::cli
