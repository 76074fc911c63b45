// Maps the parsed FRAGLESS_CONF options (fragless_config's one options table) onto the
// settings the core reads. Options the core does not implement yet are listed in
// Note [Options not yet used].
#include "core/allocator.hpp"
#include "fragless/options.hpp"

namespace fragless::core {

// Note [Options not yet used]
// release_threshold_bytes, garbage_collection_threshold, dedicated_mapping_threshold_bytes,
// max_split_bytes, small_segment_bytes, large_segment_bytes, compact_threshold_bytes and
// background_compaction are parsed (and validated) by fragless_config but not acted on by
// this version of the core: free pages are kept until empty_cache/trim/OOM, blocks are
// never "oversize", slabs are sized per class (Note [Size classes]) and the cudaMalloc
// backend uses PyTorch's segment sizes.
cache_settings settings_from_options(const options& values) {
  cache_settings settings;
  settings.use_vmm = values.backend != backend_kind::cuda_malloc;
  settings.reserved_limit_bytes = values.max_cached_bytes == unlimited_bytes
                                      ? SIZE_MAX
                                      : static_cast<std::size_t>(values.max_cached_bytes);
  settings.small_limit_bytes = static_cast<std::size_t>(values.small_max_bytes);
  return settings;
}

cache_settings settings_from_environment() { return settings_from_options(options_from_environment()); }

}  // namespace fragless::core
