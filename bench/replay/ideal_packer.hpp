// ideal_packer: the idealized packer, the reference floor of the corpus report. Best fit
// in one unbounded virtual range (blocks rounded up to 512 B, free neighbours coalesced,
// the range's free tail is unbounded), with a 2 MiB page mapped while any block touches it
// and unmapped when none does. Not an allocator one could ship: it ignores streams, has
// no size classes and maps on every touch; it shows what placement alone can reach.
// Invariant: mapped pages = pages touched by at least one live block, at every event;
// peak_mapped_bytes >= ideal_bytes - 2 MiB (it cannot beat the live bytes).
#pragma once

#include "traces/trace.hpp"

#include <cstdint>

namespace fragless::bench {

struct packer_summary {
  std::uint64_t peak_mapped_bytes = 0;
  std::uint64_t page_maps = 0;    // page transitions unmapped -> mapped
  std::uint64_t page_unmaps = 0;  // page transitions mapped -> unmapped
  std::uint64_t address_span_bytes = 0;  // highest address ever used
};

// Over the first `event_limit` events (all when 0).
packer_summary run_ideal_packer(const traces::trace& t, std::size_t event_limit = 0);

}  // namespace fragless::bench
