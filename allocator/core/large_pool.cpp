// The large pool's shared part (see large_pool.hpp): choosing the mode, stream ordering
// on reuse (Note [Stream reuse]) and the release entry points both modes implement by a
// compaction pass.
// Invariant: a free range is handed to another stream only after that stream waits on every
// stream the range remembers (or after a device synchronization).
// Not thread-safe: the device cache holds the device lock around every call.
#include "core/large_pool.hpp"

#include "backend/capture_aware_backend.hpp"
#include "core/segment_pool.hpp"
#include "core/vmm_pool.hpp"

namespace fragless::core {

large_pool::large_pool(backend::backend& device_backend, int device, event_pool& events,
                       const cache_settings& settings)
    : backend_(device_backend),
      device_(device),
      events_(events),
      settings_(settings),
      reserved_limit_bytes_(settings.conf.max_cached_bytes) {}

std::unique_ptr<large_pool> large_pool::create(backend::backend& device_backend, int device, event_pool& events,
                                               const cache_settings& settings, std::size_t range_bytes) noexcept {
  try {
    if (settings.wants_vmm() && device_backend.supports_vmm(device)) {
      auto pool = std::make_unique<vmm_pool>(device_backend, device, events, settings);
      bool host_memory_failed = false;
      if (pool->initialize(range_bytes, &host_memory_failed)) return pool;
      if (host_memory_failed) return nullptr;
      // A range that cannot be reserved falls through to cudaMalloc segments: still
      // correct, just coarser.
    }
    return std::make_unique<segment_pool>(device_backend, device, events, settings);
  } catch (...) {  // std::bad_alloc
    return nullptr;
  }
}

const loop_plan_counters& large_pool::loop_plan_counts() const noexcept {
  static const loop_plan_counters none{};
  return none;
}

std::size_t large_pool::release_cached(std::size_t bytes_to_keep) noexcept {
  return compact(compaction_pass{false, bytes_to_keep}).released_bytes;
}

// Note [Release threshold]: like release_cached, but without a device synchronization, so
// only memory whose free range is idle now goes; the rest waits for a later call.
std::size_t large_pool::release_idle_cached(std::size_t bytes_to_keep) noexcept {
  if (cached_free_bytes() <= bytes_to_keep) return 0;
  return compact(compaction_pass{false, bytes_to_keep}).released_bytes;
}

// The large pool's part of Note [Stream reuse]: a free range remembers which streams freed
// into it. Reusing it on one of them alone needs nothing: that stream's order already puts
// the new work after the old. Reusing it on any other stream makes the new stream wait on
// an event recorded now on each of those streams (cudaStreamWaitEvent): it covers every
// kernel queued before the free, and the host never blocks. A wait the new stream already
// made after the free is enough (Note [Standing waits], event_pool.hpp).
bool large_pool::wait_forbidden(const stream_set& streams, stream_id stream) const noexcept {
  return !settings_.unsafe_skip_stream_waits && backend::capture_underway() && streams.foreign_to(stream);
}

// `streams` may be a free range's own set (free_range_ref): it is read until the first
// failure, whose device synchronization clears every range's set, and then left.
backend::status large_pool::order_after_streams(const stream_set& streams, stream_id stream) noexcept {
  if (settings_.unsafe_skip_stream_waits || !streams.foreign_to(stream)) return backend::status::ok;
  const std::span<const stream_set::entry> sources = streams.entries();
  // Note [Standing waits]: the covered sources are found under one lock; a wait made below
  // may cover a later source too (Note [Transitive waits]), which order_after then finds.
  const std::uint64_t uncovered = events_.uncovered_sources(stream, sources);
  for (std::size_t i = 0; i < sources.size(); ++i) {
    const stream_set::entry& other = sources[i];
    if (other.stream == stream) continue;
    if (i < event_pool::kAskedSources && ((uncovered >> i) & 1U) == 0) {
      ++counters_.standing_waits;
      continue;
    }
    bool waited = false, recorded = false;
    const backend::status ordered = events_.order_after(stream, other.stream, other.freed_at_tick, waited, recorded);
    if (recorded) ++counters_.order_records;  // Note [Shared records]
    if (ordered == backend::status::ok) {
      ++(waited ? counters_.cross_stream_waits : counters_.standing_waits);  // Note [Standing waits]
      continue;
    }
    // The stream may have been destroyed since it freed here (its handle is dead but its
    // work still runs to completion). Only a device synchronization orders us after it;
    // it also makes every free range clean.
    backend::status synchronized = backend_.synchronize_device(device_);
    if (synchronized != backend::status::ok) return synchronized;
    ++counters_.device_syncs;
    index_.forget_streams();
    return backend::status::ok;
  }
  return backend::status::ok;
}

stream_set large_pool::freed_now(const stream_set& streams) {
  stream_set stamped = streams;
  stamped.stamp(events_.next_tick());
  return stamped;
}

bool large_pool::streams_idle(const stream_set& streams) noexcept {
  for (const stream_set::entry& each : streams.entries())
    if (events_.stream_idle(each.stream) != backend::status::ok) return false;
  return true;
}

bool large_pool::make_range_idle(std::uintptr_t address) noexcept {
  std::optional<free_range> range = index_.containing(address);
  if (!range || range->streams.empty()) return true;
  if (!streams_idle(range->streams)) return false;
  // Every stream of the range is idle now: the whole range is clean.
  try {
    index_.keep_spare_nodes();  // the insert after the carve then cannot fail
    index_.carve(range->address, range->size_bytes);
    index_.insert(free_range{range->address, range->size_bytes, range->segment_id, {}});
  } catch (...) {
    return false;
  }
  return true;
}

}  // namespace fragless::core
