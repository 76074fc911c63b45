// Text for XML and SVG documents (the benchmark's plot, fragless-stats' segment map).
// Invariant: the result is well-formed character data and attribute text: & < > " ' are
// entities, and control characters other than tab (not allowed in XML 1.0) are dropped.
#pragma once

#include <string>
#include <string_view>

namespace fragless {

std::string xml_escape(std::string_view text);

}  // namespace fragless
