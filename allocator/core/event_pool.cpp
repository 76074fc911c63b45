// Pooled events (see event_pool.hpp).
#include "core/event_pool.hpp"

#include <algorithm>

namespace fragless::core {

backend::event_handle event_pool::acquire() noexcept {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!idle_.empty()) {
      backend::event_handle event = idle_.back();
      idle_.pop_back();
      return event;
    }
  }
  backend::event_handle event = nullptr;
  if (backend_.create_event(device_, &event) != backend::status::ok) return nullptr;
  created_.fetch_add(1, std::memory_order_relaxed);
  return event;
}

void event_pool::release(backend::event_handle event) noexcept {
  if (event == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  release_locked(event);
}

void event_pool::release_locked(backend::event_handle event) noexcept {
  try {
    idle_.push_back(event);
  } catch (...) {
    backend_.destroy_event(device_, event);
  }
}

void event_pool::drain() noexcept {
  std::vector<backend::event_handle> events;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    events.swap(idle_);
  }
  for (backend::event_handle event : events) backend_.destroy_event(device_, event);
}

event_pool::~event_pool() {
  for (auto& [stand_in, record] : retired_)
    if (record->event != nullptr) backend_.destroy_event(device_, record->event);
  for (auto& [stream, latest] : latest_records_) backend_.destroy_event(device_, latest.event);
  drain();
}

event_pool::retired_stream* event_pool::find_retired_locked(backend::stream_handle stream) noexcept {
  if (retired_.empty()) return nullptr;
  const auto found = retired_.find(stream);
  return found == retired_.end() ? nullptr : found->second.get();
}

bool event_pool::is_retired(backend::stream_handle stream) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  return find_retired_locked(stream) != nullptr;
}

// Holds mutex_.
backend::status event_pool::retired_state_locked(retired_stream& record) noexcept {
  if (!record.recorded) return backend::status::error;
  if (record.event == nullptr) return backend::status::ok;
  const backend::status state = backend_.query_event(device_, record.event);
  if (state == backend::status::not_ready) return state;
  if (state != backend::status::ok) return backend::status::error;
  // Done: the event goes back to the pool; the stand-in needs nothing any more.
  release_locked(record.event);
  record.event = nullptr;
  return backend::status::ok;
}

bool event_pool::retired_work_pending(backend::stream_handle stand_in) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  retired_stream* record = find_retired_locked(stand_in);
  return record != nullptr && retired_state_locked(*record) != backend::status::ok;
}

void event_pool::forget_standing_waits(backend::stream_handle stream) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  standing_waits_.erase(stream);
  for (auto& [waiter, waits] : standing_waits_) waits.erase(stream);
  // Note [Transitive waits]: no record carries a wait on a handle a new stream may get.
  for (auto& [source, latest] : latest_records_) latest.carried.erase(stream);
  // Note [Shared records]: a new stream with this handle has recorded nothing.
  const auto latest = latest_records_.find(stream);
  if (latest == latest_records_.end()) return;
  release_locked(latest->second.event);
  latest_records_.erase(latest);
}

std::uint64_t event_pool::standing_tick_locked(backend::stream_handle waiter,
                                               backend::stream_handle source) const noexcept {
  const auto row = standing_waits_.find(waiter);
  return row == standing_waits_.end() ? 0 : row->second.tick_of(source, 0);
}

// Hot path (every reuse of memory other streams freed): one lock for all sources.
std::uint64_t event_pool::uncovered_sources(backend::stream_handle waiter,
                                            std::span<const stream_set::entry> sources) noexcept {
  const std::size_t asked = std::min(sources.size(), kAskedSources);
  std::uint64_t uncovered = 0;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto row = standing_waits_.find(waiter);
  std::span<const stream_set::entry> waits;
  if (row != standing_waits_.end()) waits = row->second.entries();
  // Both are sorted by stream: one walk over each.
  std::size_t w = 0;
  for (std::size_t i = 0; i < asked; ++i) {
    const stream_set::entry& source = sources[i];
    if (source.stream == waiter) continue;
    while (w < waits.size() && waits[w].stream < source.stream) ++w;
    const std::uint64_t standing = w < waits.size() && waits[w].stream == source.stream ? waits[w].freed_at_tick : 0;
    if (!covers(standing, source.freed_at_tick) || find_retired_locked(source.stream) != nullptr)
      uncovered |= std::uint64_t{1} << i;
  }
  return uncovered;
}

stream_set event_pool::standing_waits_of_locked(backend::stream_handle source) noexcept {
  const auto row = standing_waits_.find(source);
  if (row == standing_waits_.end()) return {};
  stream_set copy = std::move(spare_carried_);
  try {
    copy = row->second;  // into the spare's memory when it is large enough
    return copy;
  } catch (...) {
    return {};  // carries nothing: later waits are only direct
  }
}

void event_pool::note_standing_wait_locked(backend::stream_handle waiter, backend::stream_handle source,
                                           std::uint64_t tick, const stream_set& carried) noexcept {
  try {
    stream_set& waits = standing_waits_[waiter];  // each source keeps its larger tick
    waits.insert(source, tick);
    waits.merge_except(carried, waiter);  // Note [Transitive waits]
  } catch (...) {
    // No host memory to remember the wait: later reuses wait again.
  }
}

backend::stream_handle event_pool::retire(backend::stream_handle stream) noexcept {
  try {
    auto record = std::make_unique<retired_stream>();
    backend::stream_handle stand_in = record.get();  // a heap address: never a live stream's handle
    backend::event_handle event = acquire();
    record->recorded = event != nullptr && backend_.record_event(device_, event, stream) == backend::status::ok;
    if (record->recorded) {
      record->event = event;
    } else {
      release(event);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    retired_.emplace(stand_in, std::move(record));
    return stand_in;
  } catch (...) {
    return nullptr;
  }
}

backend::status event_pool::order_after(backend::stream_handle waiter, backend::stream_handle source,
                                        std::uint64_t freed_at_tick, bool& waited, bool& recorded) noexcept {
  waited = false;
  recorded = false;
  retired_stream* retired = nullptr;
  stream_set carried;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    retired = find_retired_locked(source);
    if (retired == nullptr && freed_at_tick != stream_set::kUnknownTick) {  // Note [Standing waits]
      if (covers(standing_tick_locked(waiter, source), freed_at_tick)) return backend::status::ok;
      // Note [Shared records]: an event recorded on the source after the free serves.
      const auto latest = latest_records_.find(source);
      if (latest != latest_records_.end() && latest->second.recorded_after_tick >= freed_at_tick) {
        const backend::status result = backend_.stream_wait_event(device_, waiter, latest->second.event);
        if (result != backend::status::ok) return result;
        waited = true;
        note_standing_wait_locked(waiter, source, latest->second.recorded_after_tick, latest->second.carried);
        return result;
      }
    }
    // Note [Transitive waits]: what the source has waited for so far, taken before its
    // event below is recorded.
    if (retired == nullptr) carried = standing_waits_of_locked(source);
  }
  if (retired != nullptr) {
    // Note [Retired streams]: wait on the event recorded as the stream was destroyed.
    std::lock_guard<std::mutex> lock(mutex_);
    const backend::status state = retired_state_locked(*retired);
    if (state != backend::status::not_ready) return state;
    const backend::status result = backend_.stream_wait_event(device_, waiter, retired->event);
    waited = result == backend::status::ok;
    return result;
  }
  backend::event_handle event = acquire();
  if (event == nullptr) return backend::status::error;
  // Every free stamped so far happened before this record (Note [Standing waits]).
  const std::uint64_t recorded_after_tick = next_tick();
  backend::status result = backend_.record_event(device_, event, source);
  recorded = result == backend::status::ok;
  // The wait captures the event's state at call time: the event may be recorded again
  // after it.
  if (result == backend::status::ok) result = backend_.stream_wait_event(device_, waiter, event);
  if (result != backend::status::ok) {
    release(event);
    return result;
  }
  waited = true;
  std::lock_guard<std::mutex> lock(mutex_);
  note_standing_wait_locked(waiter, source, recorded_after_tick, carried);
  // Note [Shared records]: the source's latest record now; the one it replaces goes back
  // to the pool.
  backend::event_handle replaced = event;
  try {
    latest_record& latest = latest_records_[source];
    if (latest.recorded_after_tick <= recorded_after_tick) {
      replaced = latest.event;
      latest.event = event;
      latest.recorded_after_tick = recorded_after_tick;
      std::swap(latest.carried, carried);
      spare_carried_ = std::move(carried);  // Note [Inline streams]: its memory serves the next copy
    }
  } catch (...) {
    // No host memory to keep it: the event goes back to the pool.
  }
  if (replaced != nullptr) release_locked(replaced);
  return result;
}

backend::status event_pool::stream_idle(backend::stream_handle stream) noexcept {
  retired_stream* retired = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    retired = find_retired_locked(stream);
  }
  if (retired != nullptr) {  // Note [Retired streams]
    std::lock_guard<std::mutex> lock(mutex_);
    return retired_state_locked(*retired);
  }
  backend::event_handle event = acquire();
  if (event == nullptr) return backend::status::error;
  backend::status result = backend_.record_event(device_, event, stream);
  if (result == backend::status::ok) result = backend_.query_event(device_, event);
  release(event);
  return result;
}

}  // namespace fragless::core
