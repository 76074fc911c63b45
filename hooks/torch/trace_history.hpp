// The allocation history behind torch.cuda.memory._record_memory_history(): per-device ring
// buffers of c10 TraceEntry, plus the sizes of live blocks (a free only gets a pointer, but
// its trace entry and the profiler report need the size).
// Invariant: sizes are tracked exactly while tracking() is true; blocks allocated while it
// was false are unknown to it and their frees report size 0 (see Note [History of old blocks]).
//
// Note [History contexts]
// PyTorch's RecordContext decides where stacks go: STATE keeps the allocation's stack on
// the live block only (memory_snapshot()'s block "frames"); ALLOC also puts it on the alloc
// entry, and the free entries then carry the block's allocation stack; ALL gathers a
// stack of its own at each free. Stacks are gathered by the adapter before it calls
// fragless (begin_call), never under a lock, and are the current call's context for the
// segment entries that call causes (Note [Segment events]): segment_alloc / segment_map
// carry the allocation's stack, segment_free / segment_unmap the releasing call's (ALL)
// or else the stack that reserved that address. Turning recording off empties the history
// (so does clear_history), as in PyTorch.
//
// Note [User metadata]
// torch.cuda.memory._set_memory_metadata sets a string per thread; every entry a thread
// writes while recording carries it (TraceEntry::user_metadata_).
//
// Note [Free completion]
// fragless completes a free asynchronously when other streams still use the block
// (record_stream) and does not tell its caller when. The history writes FREE_REQUESTED and
// FREE_COMPLETED together at the user's free; memory_viz's timelines then show the block
// gone at the free, where the native allocator would show it pending until its streams finish.
//
// Note [History of old blocks]
// Like PyTorch's, the history only knows blocks allocated while recording: a block allocated
// before gets no ALLOC entry, and its free is written with the size unknown (0).
#pragma once

#include <c10/core/CachingDeviceAllocator.h>

#include "fragless/fragless.hpp"

#include <atomic>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace fragless::torch {

class trace_history {
 public:
  using trace_entry = c10::CachingDeviceAllocator::TraceEntry;

  // Settings of torch.cuda.memory._record_memory_history (CUDAAllocator::recordHistory).
  void configure(bool enabled, c10::CachingDeviceAllocator::CreateContextFn context_recorder,
                 std::size_t max_entries, c10::CachingDeviceAllocator::RecordContext when,
                 bool clear_history, const std::vector<std::string>& skip_actions);
  bool enabled() const noexcept { return enabled_.load(std::memory_order_relaxed); }
  // Whether live block sizes are tracked (history or the profiler's memory view are on).
  // Hot path: one relaxed load.
  bool tracking(bool profiler_enabled) const noexcept { return profiler_enabled || enabled(); }

  // Note [History contexts]: the stack of the adapter call about to run on this thread
  // (an allocation: gathered for STATE and up; a release such as empty_cache: for ALL),
  // kept as this thread's current context until end_call. Takes no lock while gathering.
  std::shared_ptr<c10::GatheredContext> begin_allocation_call();
  void begin_release_call();
  static void end_call() noexcept;
  // Remembers a block's size and allocation stack; writes an ALLOC entry when recording.
  void on_allocate(int device, void* pointer, std::size_t size_bytes, void* stream,
                   std::shared_ptr<c10::GatheredContext> context);
  struct freed_block {
    int device;
    std::size_t size_bytes;
  };
  // Forgets the block and returns its device and size (nullopt if unknown); writes the free entries.
  std::optional<freed_block> on_free(void* pointer);
  // Whether any block's size is remembered (frees must then report, even when not tracking).
  bool knows_blocks() const noexcept { return known_blocks_.load(std::memory_order_relaxed) != 0; }
  // The allocation stack of a live block (nullptr if none was recorded).
  std::shared_ptr<c10::GatheredContext> context_of(const void* pointer) const;
  // Note [User metadata]: the calling thread's metadata string.
  static void set_user_metadata(const std::string& metadata);
  static std::string user_metadata();
  // Note [Segment events]: fragless maps and unmaps 2 MiB pages (PyTorch's expandable
  // segments do the same), and obtains and releases whole mappings and cudaMalloc
  // segments; each is written as a SEGMENT_MAP / SEGMENT_UNMAP / SEGMENT_ALLOC /
  // SEGMENT_FREE entry with the default stream, so memory_viz can draw reserved memory.
  // Called with a fragless device lock held; takes only this object's lock.
  void on_segment(const fragless::segment_event& event) noexcept;
  // Writes an OOM entry (addr_ is the device's free bytes, as PyTorch does).
  void on_out_of_memory(int device, std::size_t size_bytes, std::size_t device_free_bytes, void* stream);

  // Observers called with every entry written (attachAllocatorTraceTracker). Called under
  // this object's lock: they must not call back into the allocator.
  void add_tracker(c10::CachingDeviceAllocator::AllocatorTraceTracker tracker);

  // The entries of each device, oldest first (device_count lists).
  std::vector<std::vector<trace_entry>> entries(int device_count) const;

 private:
  struct live_block {
    int device;
    std::size_t size_bytes;
    void* stream;
    std::shared_ptr<c10::GatheredContext> context;  // Note [History contexts]
  };
  struct ring {
    std::vector<trace_entry> entries;
    std::size_t next = 0;  // where the next entry goes once entries is full
  };
  // Caller holds mutex_.
  void write_locked(trace_entry entry);
  bool skipped_locked(trace_entry::Action action) const;
  // The recorder if stacks are wanted at `level` or above (read under the lock, called outside it).
  c10::CachingDeviceAllocator::CreateContextFn recorder_for(c10::CachingDeviceAllocator::RecordContext level) const;

  std::atomic<bool> enabled_{false};
  mutable std::mutex mutex_;
  c10::CachingDeviceAllocator::CreateContextFn context_recorder_ = nullptr;
  c10::CachingDeviceAllocator::RecordContext when_ = c10::CachingDeviceAllocator::RecordContext::NEVER;
  std::size_t max_entries_ = 0;
  std::vector<std::string> skip_actions_;
  std::unordered_map<int, ring> rings_;
  std::unordered_map<void*, live_block> live_blocks_;
  std::atomic<std::size_t> known_blocks_{0};  // live_blocks_.size(), read without the lock
  // Stacks of reserved ranges by start address, for their segment_free / segment_unmap.
  std::unordered_map<std::uintptr_t, std::shared_ptr<c10::GatheredContext>> segment_contexts_;
  std::vector<c10::CachingDeviceAllocator::AllocatorTraceTracker> trackers_;
};

}  // namespace fragless::torch
