// What one device cache is built with: the FRAGLESS_CONF options as parsed -- one
// fragless::options value, its fields named and defaulted by options_fields.def -- and the
// few internal knobs that are not user options (fixed in production, varied by tests).
// Invariant: components read an option from `conf` under its table name; no default of an
// option is written anywhere but the table, and the internal knobs' defaults only here.
#pragma once

#include <cstddef>
#include <cstdint>

#include "fragless/options.hpp"

namespace fragless::core {

// Note [Narrower options]
// Options with a narrower meaning in the core than their table entry:
//  - small_max_bytes is capped at 64 KiB, the largest size class (Note [Size classes]):
//    requests above 64 KiB always go to the large pool (at 512 B granularity), whatever
//    the value. The table's default (1 MiB, PyTorch's small-pool bound) is capped
//    silently; any other value above the cap logs a warning saying so (where FRAGLESS_CONF
//    is read, api/global_allocator.cpp).
//  - small_segment_bytes / large_segment_bytes size cudaMalloc-mode segments only
//    (Note [Segment sizes]); in VMM mode memory grows by physical pages and slabs are
//    sized per class.
//  - dedicated_mapping_threshold_bytes applies to VMM mode (Note [Dedicated mappings]).
//  - max_split_bytes never splitting a cached block applies to cudaMalloc mode; in VMM
//    mode it only sets the oversize threshold of the stats (Note [Max split size]).
// A size option set to "unlimited" holds unlimited_bytes (== SIZE_MAX on the 64-bit
// targets we build for), which every component reads as "no limit" / "never".
struct cache_settings {
  options conf;  // FRAGLESS_CONF, as options_fields.def names and defaults it

  // ---- internal knobs (not FRAGLESS_CONF options) ----
  double virtual_range_factor = 2.0;       // VMM range = factor * device capacity
  bool unsafe_skip_stream_waits = false;   // test-only (Note [Stream reuse])
  std::uint32_t compaction_age_passes = 10;              // Note [Compaction]
  std::int64_t compaction_interval_ns = 1'000'000'000;   // Note [Compaction]
  std::int64_t exact_start_allocations = 1024;           // Note [Exact start]; 0: off
  std::int64_t small_program_exact_allocations = 65536;  // Note [Exact start]
  std::size_t small_program_reserved_bytes = std::size_t{64} << 20;  // Note [Exact start]

  // VMM unless the cudaMalloc backend was asked for (auto falls back when unsupported).
  bool wants_vmm() const noexcept { return conf.backend != backend_kind::cuda_malloc; }
  // Defaults with the backend chosen: vmm (true) or cudaMalloc (false).
  static cache_settings for_backend(bool vmm) noexcept {
    cache_settings settings;
    settings.conf.backend = vmm ? backend_kind::vmm : backend_kind::cuda_malloc;
    return settings;
  }
};

}  // namespace fragless::core
