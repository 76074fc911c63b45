// fragless as a c10::cuda::CUDACachingAllocator::CUDAAllocator: the adapter PyTorch talks to
// once fragless::torch::install() ran. Every method forwards to fragless's public API and
// converts; what fragless cannot do fails with a message saying why.
// Invariant: every pointer this adapter hands out came from fragless::allocate and goes back
// through fragless::deallocate (DataPtr deleter or raw_delete), exactly once.
//
// Note [Private pools in PyTorch]
// torch.cuda.MemPool / use_mem_pool and CUDA graph capture route allocations to private
// pools (beginAllocateToPool with a stream filter). Each (device, MempoolId_t) is one
// fragless pool (Note [Private pools] in the core): its blocks are never reused outside
// it. pool_router keeps PyTorch's use counts and LIFO routing (Note [Pool use counts]);
// snapshots tag segments with owner_private_pool_id and filter by pool id; every pool
// acts as use_on_oom (an out-of-memory releases all pools' unused memory before it is
// reported). torch.cuda.empty_cache() keeps live pools' cached memory (PyTorch's rule: a
// captured graph may still use it); a pool's memory goes back once the pool is released.
// Checkpoint state for CUDA graph trees: Note [Pool checkpoints]. Not supported, each
// saying why: pools with an allocator of their own, no_split pools.
//
// Note [IPC in PyTorch]
// shareIpcHandle exports the block (fragless::export_block: file descriptors of its pages,
// Note [IPC sharing] in the core) with offset 0; getIpcDevPtr maps a handle once and hands
// the same mapping to every storage opened from it until the last is gone. The receiving
// process must run fragless too (torch.multiprocessing's spawned workers import the same
// main module, so they install it the same way).
//
// Note [Torch versions]
// The adapter builds against torch 2.11 to 2.15. CMake compiles a probe per API difference
// against the torch headers it builds with (cmake/TorchFeatures.cmake) and passes 0/1 as
// FRAGLESS_TORCH_HAS_*; the code tests those, never version numbers, so a release that
// gains or drops a member needs no edit here. What each difference means:
//  - DeviceStats::num_oom_rejections (HAS_OOM_REJECTIONS) and OomRejectionObserver /
//    attachOomRejectionObserver (HAS_OOM_REJECTION_OBSERVER): PyTorch's pre-emptive OOM
//    policy. fragless never rejects pre-emptively, so where they exist the count is 0 and
//    the observer is never called; where they do not, nothing is lost.
//  - virtual markCaptureBegin/End (HAS_CAPTURE_MARKS): how PyTorch tells the allocator a
//    CUDA graph capture is underway (Note [Capture underway] in the core). Releases without
//    them only route a capture's allocations to its pool (beginAllocateToPool, called just
//    before the capture starts; endAllocateToPool just after it ends), exactly as they do
//    for use_mem_pool, and their own allocator treats every such routing as a possible
//    capture. So does the adapter there: begin/endAllocateToPool bracket
//    fragless::begin_capture/end_capture, and while any pool routing is active no forbidden
//    call is made (memory is released only after it ends). With the marks (2.15), only a
//    real capture does that.
//  - TraceEntry::ANNOTATE (HAS_ANNOTATE_ENTRY): one more action name in trace_history; the
//    adapter records no annotations, so only the name table changes.
//  - virtual getContextForPointer (HAS_CONTEXT_FOR_POINTER) and supportsUserMetadata
//    (HAS_USER_METADATA_SUPPORT): newer hooks into the history the adapter keeps anyway.
//    Without them (2.11) torch never asks, and set/getUserMetadata (virtual in every
//    supported release) still stamp and read the metadata.
#pragma once

#include <c10/cuda/CUDACachingAllocator.h>

#if !defined(FRAGLESS_TORCH_HAS_CAPTURE_MARKS) || !defined(FRAGLESS_TORCH_HAS_OOM_REJECTION_OBSERVER)
#error "build through CMake: it detects the torch API (Note [Torch versions])"
#endif

#include <memory>
#include <mutex>
#include <unordered_map>
#include <string>
#include <vector>

#include "pool_checkpoints.hpp"
#include "pool_router.hpp"
#include "trace_history.hpp"
#include "uncached_blocks.hpp"

namespace fragless::torch {

namespace c10_allocator = c10::cuda::CUDACachingAllocator;

class torch_allocator final : public c10_allocator::CUDAAllocator {
 public:
  // ---- c10::Allocator ----
  c10::DataPtr allocate(std::size_t size_bytes) override;
  c10::DeleterFnPtr raw_deleter() const override;
  void copy_data(void* destination, const void* source, std::size_t count) const override;

  // ---- c10::DeviceAllocator ----
  bool initialized() override;
  void emptyCache(c10::MempoolId_t mempool_id) override;
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override;
  void resetAccumulatedStats(c10::DeviceIndex device) override;
  void resetPeakStats(c10::DeviceIndex device) override;

  // ---- CUDAAllocator ----
  void* raw_alloc(std::size_t size_bytes) override;
  void* raw_alloc_with_stream(std::size_t size_bytes, cudaStream_t stream) override;
  void raw_delete(void* pointer) override;
  void init(int device_count) override;
  double getMemoryFraction(c10::DeviceIndex device) override;
  void setMemoryFraction(double fraction, c10::DeviceIndex device) override;
  std::vector<c10_allocator::StreamSegmentSize> getExpandableSegmentSizes(c10::DeviceIndex device) override;
  void enable(bool value) override;
  bool isEnabled() const override;
  void cacheInfo(c10::DeviceIndex device, std::size_t* largest_block_bytes) override;
  void* getBaseAllocation(void* pointer, std::size_t* size_bytes) override;
  using CUDAAllocator::recordStream;
  void recordStream(const c10::DataPtr& data, c10::cuda::CUDAStream stream) override;
  c10_allocator::SnapshotInfo snapshot(c10::MempoolId_t mempool_id, bool include_traces) override;
  void beginAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t mempool_id,
                           std::function<bool(cudaStream_t)> filter) override;
  void endAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t mempool_id) override;
#if FRAGLESS_TORCH_HAS_CAPTURE_MARKS
  void markCaptureBegin(c10::DeviceIndex device) override;
  void markCaptureEnd(c10::DeviceIndex device) override;
#endif
  void releasePool(c10::DeviceIndex device, c10::MempoolId_t mempool_id) override;
  int getPoolUseCount(c10::DeviceIndex device, c10::MempoolId_t mempool_id) override;
  void createOrIncrefPool(c10::DeviceIndex device, c10::MempoolId_t mempool_id,
                          std::shared_ptr<CUDAAllocator> allocator) override;
  void setUseOnOOM(c10::DeviceIndex device, c10::MempoolId_t mempool_id, bool use_on_oom) override;
  void setNoSplit(c10::DeviceIndex device, c10::MempoolId_t mempool_id) override;
  bool checkPoolLiveAllocations(c10::DeviceIndex device, c10::MempoolId_t mempool_id,
                                const std::unordered_set<void*>& expected_live_allocations) override;
  c10_allocator::ShareableHandle shareIpcHandle(void* pointer) override;
  std::shared_ptr<void> getIpcDevPtr(std::string handle) override;
  bool isHistoryEnabled() override;
  void recordHistory(bool enabled, c10::CachingDeviceAllocator::CreateContextFn context_recorder,
                     std::size_t alloc_trace_max_entries, c10::CachingDeviceAllocator::RecordContext when,
                     bool clear_history, const std::vector<std::string>& skip_actions) override;
#if FRAGLESS_TORCH_HAS_CONTEXT_FOR_POINTER
  std::shared_ptr<c10::GatheredContext> getContextForPointer(const void* pointer) override;
#endif
#if FRAGLESS_TORCH_HAS_USER_METADATA_SUPPORT
  bool supportsUserMetadata() override;
#endif
  void setUserMetadata(const std::string& metadata) override;
  std::string getUserMetadata() override;
  void attachOutOfMemoryObserver(c10_allocator::OutOfMemoryObserver observer) override;
#if FRAGLESS_TORCH_HAS_OOM_REJECTION_OBSERVER
  void attachOomRejectionObserver(c10_allocator::OomRejectionObserver observer) override;
#endif
  void attachAllocatorTraceTracker(c10::CachingDeviceAllocator::AllocatorTraceTracker tracker) override;
  void enablePeerAccess(c10::DeviceIndex device, c10::DeviceIndex device_to_access) override;
  cudaError_t memcpyAsync(void* destination, int destination_device, const void* source, int source_device,
                          std::size_t count, cudaStream_t stream, bool p2p_enabled) override;
  std::shared_ptr<c10_allocator::AllocatorState> getCheckpointState(c10::DeviceIndex device,
                                                                     c10::MempoolId_t id) override;
  c10_allocator::CheckpointDelta setCheckpointPoolState(
      c10::DeviceIndex device, std::shared_ptr<c10_allocator::AllocatorState> state) override;
  std::string name() override;

  // The one adapter of the process (never destroyed: DataPtr deleters may run at exit).
  static torch_allocator& instance();
  // fragless's stats as torch.cuda.memory_stats() shows them: blocks held only for graph-tree
  // checkpoints count as freed (Note [Pool checkpoints]). fragless.stats() reports these.
  device_stats visible_stats(int device) const;
  // The deleter of every DataPtr this adapter makes.
  static void delete_block(void* pointer) noexcept;

 private:
  // Hot path: allocate on (device, stream), report to history and profiler.
  void* allocate_block(std::size_t size_bytes, int device, cudaStream_t stream);
  // Slow path, no lock held: observers, history, then throws c10::OutOfMemoryError with
  // PyTorch's message (out_of_memory_message.hpp).
  [[noreturn]] void raise_out_of_memory(std::size_t size_bytes, int device, cudaStream_t stream);
  // The DataPtr deleter while the caching allocator is disabled (uncached_blocks.hpp).
  static void delete_uncached_block(void* pointer) noexcept;
  // False (nothing done) for a pointer fragless did not hand out.
  bool free_block(void* pointer, bool warn_if_unknown = true) noexcept;
  void describe_blocks(c10::CachingDeviceAllocator::SegmentInfo& segment) const;
  void report_to_profiler(void* pointer, std::int64_t signed_size_bytes, int device) noexcept;
  int device_count() const;

  trace_history history_;
  pool_router pools_;
  pool_checkpoints checkpoints_;  // Note [Pool checkpoints]
  uncached_blocks uncached_;      // caching_allocator_enable(False)
  std::atomic<bool> enabled_{true};
  std::mutex ipc_mutex_;  // guards opened_handles_
  std::unordered_map<std::string, std::weak_ptr<void>> opened_handles_;
  std::mutex settings_mutex_;  // guards the fields below
  std::vector<double> memory_fractions_;
  std::vector<bool> fraction_set_;  // PyTorch names the allowed bytes in OOM messages once one is set
  std::vector<c10_allocator::OutOfMemoryObserver> oom_observers_;
  std::atomic<bool> initialized_{false};
};

}  // namespace fragless::torch
