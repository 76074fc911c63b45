// ideal: see header.
#include "ideal.hpp"

#include <algorithm>

namespace fragless::bench {

ideal_summary compute_ideal(const traces::trace& t, std::size_t event_limit) {
  ideal_summary summary;
  const std::size_t end = event_limit == 0 ? t.events.size() : std::min(event_limit, t.events.size());
  std::uint64_t live = 0;
  std::uint64_t live_rounded = 0;
  for (std::size_t i = 0; i < end; ++i) {
    const traces::trace_event& e = t.events[i];
    const std::uint64_t rounded = round_up(e.size_bytes, block_rounding_bytes);
    if (e.op == traces::trace_op::alloc) {
      live += e.size_bytes;
      live_rounded += rounded;
    } else {
      live -= e.size_bytes;
      live_rounded -= rounded;
    }
    summary.peak_live_bytes = std::max(summary.peak_live_bytes, live);
    if (live_rounded > summary.peak_live_rounded_bytes) {
      summary.peak_live_rounded_bytes = live_rounded;
      summary.peak_event = i;
    }
  }
  summary.ideal_bytes = round_up(summary.peak_live_rounded_bytes, page_granule_bytes);
  return summary;
}

}  // namespace fragless::bench
