// Ring buffers of trace entries and the live-block size table (see trace_history.hpp).
#include "trace_history.hpp"

#include <algorithm>

namespace fragless::torch {
namespace {

using c10::CachingDeviceAllocator::RecordContext;
using trace_entry = trace_history::trace_entry;

const char* action_name(trace_entry::Action action) {
  switch (action) {
    case trace_entry::ALLOC: return "alloc";
    case trace_entry::FREE_REQUESTED: return "free_requested";
    case trace_entry::FREE_COMPLETED: return "free_completed";
    case trace_entry::SEGMENT_ALLOC: return "segment_alloc";
    case trace_entry::SEGMENT_FREE: return "segment_free";
    case trace_entry::SEGMENT_MAP: return "segment_map";
    case trace_entry::SEGMENT_UNMAP: return "segment_unmap";
    case trace_entry::SNAPSHOT: return "snapshot";
    case trace_entry::OOM: return "oom";
#if FRAGLESS_TORCH_HAS_ANNOTATE_ENTRY  // Note [Torch versions]
    case trace_entry::ANNOTATE: return "annotate";
#endif
  }
  return "";
}

// Note [History contexts]: the stack of the adapter call running on this thread.
thread_local std::shared_ptr<c10::GatheredContext> call_context;
// Note [User metadata]
thread_local std::string thread_user_metadata;

}  // namespace

c10::CachingDeviceAllocator::CreateContextFn trace_history::recorder_for(RecordContext level) const {
  std::lock_guard lock(mutex_);
  return enabled() && when_ >= level ? context_recorder_ : nullptr;
}

std::shared_ptr<c10::GatheredContext> trace_history::begin_allocation_call() {
  const auto recorder = recorder_for(RecordContext::STATE);
  call_context = recorder != nullptr ? recorder() : nullptr;
  return call_context;
}

void trace_history::begin_release_call() {
  const auto recorder = recorder_for(RecordContext::ALL);
  call_context = recorder != nullptr ? recorder() : nullptr;
}

void trace_history::end_call() noexcept { call_context.reset(); }

void trace_history::set_user_metadata(const std::string& metadata) { thread_user_metadata = metadata; }

std::string trace_history::user_metadata() { return thread_user_metadata; }

std::shared_ptr<c10::GatheredContext> trace_history::context_of(const void* pointer) const {
  std::lock_guard lock(mutex_);
  auto found = live_blocks_.find(const_cast<void*>(pointer));
  return found == live_blocks_.end() ? nullptr : found->second.context;
}

void trace_history::configure(bool enabled, c10::CachingDeviceAllocator::CreateContextFn context_recorder,
                              std::size_t max_entries, RecordContext when, bool clear_history,
                              const std::vector<std::string>& skip_actions) {
  std::lock_guard lock(mutex_);
  context_recorder_ = enabled ? context_recorder : nullptr;
  when_ = enabled ? when : RecordContext::NEVER;
  max_entries_ = std::max<std::size_t>(max_entries, 1);
  skip_actions_ = skip_actions;
  // Note [History contexts]: stopping, or clear_history, starts the next recording empty.
  if (!enabled || clear_history) {
    rings_.clear();
    segment_contexts_.clear();
  }
  enabled_.store(enabled, std::memory_order_relaxed);
}

void trace_history::on_allocate(int device, void* pointer, std::size_t size_bytes, void* stream,
                                std::shared_ptr<c10::GatheredContext> context) {
  std::lock_guard lock(mutex_);
  live_blocks_[pointer] = live_block{device, size_bytes, stream, context};
  known_blocks_.store(live_blocks_.size(), std::memory_order_relaxed);
  if (!enabled()) return;
  // Note [History contexts]: the alloc entry carries the stack from ALLOC up.
  write_locked(trace_entry(trace_entry::ALLOC, static_cast<c10::DeviceIndex>(device),
                           reinterpret_cast<std::uintptr_t>(pointer), size_bytes, stream, {0, 0},
                           c10::getApproximateTime(), when_ >= RecordContext::ALLOC ? std::move(context) : nullptr));
}

std::optional<trace_history::freed_block> trace_history::on_free(void* pointer) {
  // Note [History contexts]: with ALL the free's own stack, gathered before taking the lock.
  const auto recorder = recorder_for(RecordContext::ALL);
  std::shared_ptr<c10::GatheredContext> context = recorder != nullptr ? recorder() : nullptr;
  std::lock_guard lock(mutex_);
  auto found = live_blocks_.find(pointer);
  if (found == live_blocks_.end()) return std::nullopt;  // Note [History of old blocks]
  live_block block = std::move(found->second);
  live_blocks_.erase(found);
  known_blocks_.store(live_blocks_.size(), std::memory_order_relaxed);
  if (enabled()) {
    if (context == nullptr && when_ >= RecordContext::ALLOC) context = block.context;
    const auto device = static_cast<c10::DeviceIndex>(block.device);
    const auto address = reinterpret_cast<std::uintptr_t>(pointer);
    // Note [Free completion]
    write_locked(trace_entry(trace_entry::FREE_REQUESTED, device, address, block.size_bytes, block.stream,
                             {0, 0}, c10::getApproximateTime(), context));
    write_locked(trace_entry(trace_entry::FREE_COMPLETED, device, address, block.size_bytes, block.stream,
                             {0, 0}, c10::getApproximateTime(), std::move(context)));
  }
  return freed_block{block.device, block.size_bytes};
}

void trace_history::on_segment(const fragless::segment_event& event) noexcept {
  if (!enabled()) return;
  trace_entry::Action action = trace_entry::SEGMENT_MAP;
  switch (event.kind) {
    case fragless::segment_event_kind::map: action = trace_entry::SEGMENT_MAP; break;
    case fragless::segment_event_kind::unmap: action = trace_entry::SEGMENT_UNMAP; break;
    case fragless::segment_event_kind::alloc: action = trace_entry::SEGMENT_ALLOC; break;
    case fragless::segment_event_kind::free: action = trace_entry::SEGMENT_FREE; break;
  }
  try {
    std::lock_guard lock(mutex_);
    // Note [History contexts]: reserving takes the allocation's stack (and remembers it for
    // the range); releasing the releasing call's, else the stack that reserved the range.
    std::shared_ptr<c10::GatheredContext> context = call_context;
    const bool reserves = action == trace_entry::SEGMENT_MAP || action == trace_entry::SEGMENT_ALLOC;
    if (reserves) {
      if (context != nullptr) segment_contexts_[event.address] = context;
    } else if (auto found = segment_contexts_.find(event.address); found != segment_contexts_.end()) {
      if (context == nullptr) context = found->second;
      segment_contexts_.erase(found);
    }
    write_locked(trace_entry(action, static_cast<c10::DeviceIndex>(event.device), event.address, event.size_bytes,
                             nullptr, {0, 0}, c10::getApproximateTime(), std::move(context)));
  } catch (...) {
    // No host memory for the entry: the history misses it, the allocator goes on.
  }
}

void trace_history::on_out_of_memory(int device, std::size_t size_bytes, std::size_t device_free_bytes,
                                     void* stream) {
  if (!enabled()) return;
  const auto recorder = recorder_for(RecordContext::ALLOC);
  std::shared_ptr<c10::GatheredContext> context = recorder != nullptr ? recorder() : nullptr;
  std::lock_guard lock(mutex_);
  write_locked(trace_entry(trace_entry::OOM, static_cast<c10::DeviceIndex>(device), device_free_bytes,
                           size_bytes, stream, {0, 0}, c10::getApproximateTime(), std::move(context)));
}

void trace_history::add_tracker(c10::CachingDeviceAllocator::AllocatorTraceTracker tracker) {
  std::lock_guard lock(mutex_);
  trackers_.push_back(std::move(tracker));
}

std::vector<std::vector<trace_entry>> trace_history::entries(int device_count) const {
  std::lock_guard lock(mutex_);
  std::vector<std::vector<trace_entry>> result(static_cast<std::size_t>(std::max(device_count, 0)));
  for (const auto& [device, device_ring] : rings_) {
    if (device < 0 || device >= device_count) continue;
    auto& out = result[static_cast<std::size_t>(device)];
    // Oldest first: the ring's tail [next, end) precedes its head [0, next).
    const auto next = static_cast<std::ptrdiff_t>(device_ring.next);
    out.insert(out.end(), device_ring.entries.begin() + next, device_ring.entries.end());
    out.insert(out.end(), device_ring.entries.begin(), device_ring.entries.begin() + next);
  }
  return result;
}

bool trace_history::skipped_locked(trace_entry::Action action) const {
  const std::string name = action_name(action);
  return std::find(skip_actions_.begin(), skip_actions_.end(), name) != skip_actions_.end();
}

void trace_history::write_locked(trace_entry entry) {
  entry.user_metadata_ = thread_user_metadata;  // Note [User metadata]
  for (const auto& tracker : trackers_) tracker(entry);
  if (skipped_locked(entry.action_)) return;
  ring& target = rings_[entry.device_];
  if (target.entries.size() < max_entries_) {
    target.entries.push_back(std::move(entry));
  } else {
    target.entries[target.next] = std::move(entry);
    target.next = (target.next + 1) % target.entries.size();
  }
}

}  // namespace fragless::torch
