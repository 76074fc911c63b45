// VMM pool: compaction passes, the one way cached memory leaves the pool
// (Note [Compaction]); release_cached / release_idle_cached (large_pool.cpp) are passes
// with fixed settings.
// Invariant: a pass never unmaps a page a live block touches, never unmaps a page (or
// releases a mapping) while a stream its free range remembers may still touch it (a
// device synchronization makes what was freed before it forget its streams, Note
// [Synchronized settle]), and accounts every handle it takes off a page: released, or
// queued in unreleased_ for a later retry.
// Not thread-safe: the device cache holds the device lock around every call.
#include "core/vmm_pool.hpp"
#include "core/log.hpp"

namespace fragless::core {

// Note [Compaction]
// A compaction pass gives back free pages (whole chunks, Note [Physical chunks]: a chunk
// goes when none of its pages has live bytes): every mapped page no live block touches is
// unmapped once no stream can still touch it (its free range answers idle to pooled
// events; no device synchronization on this path), and cached dedicated/stitched mappings
// likewise, and its physical handle released -- except the kCachedPagesKept lowest free
// pages, which an explicit pass leaves mapped as a small cache (the next blocks placed
// there need no device call; any other place can take them by a page move). So afterwards
// reserved = the pages live blocks touch + free pages streams may still touch + at most
// kCachedPagesKept pages. Live blocks never move; only free pages do. Passes run:
//  - on compact() (explicit);
//  - on empty_cache()/trim() and before an out-of-memory error, after a device
//    synchronization, keeping nothing / the bytes asked for (Note [Out of memory]);
//  - automatically, when cached free bytes exceed compact_threshold_bytes, at most once per
//    cache_settings::compaction_interval_ns (1 s), from the allocation slow path (or a
//    background thread with background_compaction). An automatic pass only takes pages
//    that stayed free through the last cache_settings::compaction_age_passes (10) passes
//    (page_map epochs advance with each pass), so at the default interval a page must have
//    been idle for about ten seconds: a training loop whose steps are shorter than that
//    keeps its pages mapped and makes no map/unmap call in steady state, while memory a
//    shrinking workload no longer touches goes back within seconds. (With one pass of
//    age, a loop whose step outlasts the interval returned pages mid-step and created them
//    again in the next one: the benchmark's longest traces showed thousands of calls per
//    step that way.)
// In cudaMalloc mode a pass releases whole free idle segments only (segment_pool::compact).

compaction_outcome vmm_pool::compact(const compaction_pass& pass) noexcept {
  compaction_outcome outcome;
  const std::size_t before = reserved_bytes();
  // Note [Dormant mappings]: a released handle's memory goes back once its last mapping does.
  for (const dormant_mappings::mapping* orphan = dormant_.first_orphan(); orphan != nullptr && unmap_dormant(*orphan);
       orphan = dormant_.first_orphan()) {
  }
  std::vector<backend::physical_handle> retry;
  retry.swap(unreleased_);
  for (backend::physical_handle handle : retry) release_handle(handle);
  std::size_t mapped_cached = mapped_cached_bytes();
  release_dedicated_mappings(pass, &mapped_cached);
  compact_pages(pass, &mapped_cached, &outcome.unmapped_pages);
  outcome.released_bytes = before - std::min(before, reserved_bytes());
  return outcome;
}

// Unmaps free pages, highest first, while more than pass.bytes_to_keep free bytes stay
// mapped; counts them in *unmapped_pages.
void vmm_pool::compact_pages(const compaction_pass& pass, std::size_t* mapped_cached,
                               std::size_t* unmapped_pages) noexcept {
  if (*mapped_cached <= pass.bytes_to_keep || pages_.cached_free_pages().empty()) return;
  std::vector<std::size_t> pages;
  try {
    const page_set& cached = pages_.cached_free_pages();
    pages.reserve(cached.size());
    for (std::size_t page = cached.highest_below(page_set::npos); page != page_set::npos;
         page = cached.highest_below(page))
      pages.push_back(page);
  } catch (...) {
    return;
  }
  // A busy range is asked about once, not once per page.
  std::uintptr_t busy_start = 0;
  std::uintptr_t busy_end = 0;
  std::size_t failed_unmaps = 0;
  // Chunks go whole (Note [Physical chunks]): one whose pages are not all free stays.
  std::size_t done_head = SIZE_MAX;
  for (std::size_t page : pages) {
    if (*mapped_cached <= pass.bytes_to_keep) break;
    if (!pages_.is_mapped(page)) continue;  // its chunk went earlier in this pass
    const std::size_t head = pages_.chunk_head(page);
    if (head == done_head) continue;
    done_head = head;
    const std::size_t count = pages_.chunk_pages(head);
    if (!pages_.chunk_free(head)) continue;
    if (pass.aged_only) {
      bool aged = true;
      for (std::size_t member = head; member < head + count && aged; ++member)
        aged = old_enough(pages_.free_since_epoch(member));
      if (!aged) continue;
    }
    // After a synchronization only ranges freed since remember streams (Note [Synchronized
    // settle]); the others answer idle without a device call.
    const std::uintptr_t address = pages_.page_address(head);
    if (address >= busy_start && address < busy_end) continue;
    if (!make_chunk_idle(head)) {
      if (std::optional<free_range> busy = index_.containing(address)) {
        busy_start = busy->address;
        busy_end = busy->address + busy->size_bytes;
      }
      continue;
    }
    const std::size_t bytes = count * pages_.page_bytes();
    backend::physical_handle handle = 0;
    if (!unmap_chunk(head, &handle)) {
      ++failed_unmaps;  // the chunk stays mapped and cached; a later pass tries again
      continue;
    }
    release_handle(handle);
    *mapped_cached -= std::min(*mapped_cached, bytes);
    *unmapped_pages += count;
  }
  if (failed_unmaps > 0 && log_enabled(log_level::warn)) {
    try {
      log_message(log_level::warn, "device " + std::to_string(device_) + ": " + std::to_string(failed_unmaps) +
                                       " page(s) could not be unmapped and stay reserved (" +
                                       std::to_string(failed_unmaps * pages_.page_bytes()) +
                                       " bytes; retried at the next release): " + backend_.last_error_text());
    } catch (...) {
    }
  }
}

}  // namespace fragless::core
