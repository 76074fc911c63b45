// Maps the parsed FRAGLESS_CONF options (fragless_config's one options table) onto the
// settings the core reads. Invariant: every option the table documents reaches the core
// here; where the core gives an option a narrower meaning, the Note below says so.
#include <algorithm>
#include <cstdint>

#include "core/allocator.hpp"
#include "core/log.hpp"
#include "core/size_classes.hpp"
#include "fragless/options.hpp"

namespace fragless::core {
namespace {

std::size_t bytes_or_unlimited(std::uint64_t value) noexcept {
  return value == unlimited_bytes || value > SIZE_MAX ? SIZE_MAX : static_cast<std::size_t>(value);
}

}  // namespace

// Note [Narrower options]
// Options with a narrower meaning than their table entry:
//  - small_max_bytes is capped at 64 KiB, the largest size class (Note [Size classes]):
//    requests above 64 KiB always go to the large pool (at 512 B granularity), whatever
//    the value. The table's default (1 MiB, PyTorch's small-pool bound) is capped
//    silently; any other value above the cap logs a warning saying so.
//  - small_segment_bytes / large_segment_bytes size cudaMalloc-mode segments only
//    (Note [Segment sizes]); in VMM mode memory grows by physical pages and slabs are
//    sized per class.
//  - dedicated_mapping_threshold_bytes applies to VMM mode (Note [Dedicated mappings]).
//  - max_split_bytes never splitting a cached block applies to cudaMalloc mode; in VMM
//    mode it only sets the oversize threshold of the stats (Note [Max split size]).
cache_settings settings_from_options(const options& values) {
  cache_settings settings;
  settings.use_vmm = values.backend != backend_kind::cuda_malloc;
  settings.reserved_limit_bytes = bytes_or_unlimited(values.max_cached_bytes);
  settings.small_limit_bytes = static_cast<std::size_t>(values.small_max_bytes);
  if (values.small_max_bytes > kSmallLimitBytes && values.small_max_bytes != options{}.small_max_bytes)
    log_message(log_level::warn, "small_max_bytes " + std::to_string(values.small_max_bytes) +
                                     " is above the largest size class (65536 bytes): requests above 64 KiB "
                                     "are served by the large pool");
  settings.release_threshold_bytes = bytes_or_unlimited(values.release_threshold_bytes);
  settings.garbage_collection_fraction = values.garbage_collection_threshold;
  settings.max_split_bytes = bytes_or_unlimited(values.max_split_bytes);
  settings.dedicated_mapping_bytes = bytes_or_unlimited(values.dedicated_mapping_threshold_bytes);
  settings.compact_threshold_bytes = bytes_or_unlimited(values.compact_threshold_bytes);
  settings.background_compaction = values.background_compaction;
  settings.page_moves = values.page_moves;
  settings.page_move_headroom = values.page_move_headroom;
  settings.loop_plans = values.loop_plans;
  settings.loop_plan_headroom = values.loop_plan_headroom;
  settings.small_segment_bytes = static_cast<std::size_t>(values.small_segment_bytes);
  settings.large_segment_bytes = static_cast<std::size_t>(values.large_segment_bytes);
  return settings;
}

cache_settings settings_from_environment() { return settings_from_options(options_from_environment()); }

}  // namespace fragless::core
