// The CUDAAllocator adapter over fragless's public API (see torch_allocator.hpp).
#include "torch_allocator.hpp"

#include <c10/core/Allocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <limits>

#include "c10_conversion.hpp"
#include "fragless/fragless.hpp"
#include "out_of_memory_message.hpp"

namespace fragless::torch {
namespace {

stream_t as_fragless(cudaStream_t stream) { return static_cast<stream_t>(stream); }

bool is_default_pool(c10::MempoolId_t id) { return id.first == 0 && id.second == 0; }

int current_device() { return static_cast<int>(c10::cuda::current_device()); }

// Note [History contexts]: ends the current call's context however the call leaves.
struct history_call_scope {
  ~history_call_scope() { trace_history::end_call(); }
};

}  // namespace

torch_allocator& torch_allocator::instance() {
  static auto* adapter = new torch_allocator();  // never destroyed: deleters may run at exit
  return *adapter;
}

int torch_allocator::device_count() const { return static_cast<int>(c10::cuda::device_count()); }

// ---- allocation (hot path) ----

void* torch_allocator::allocate_block(std::size_t size_bytes, int device, cudaStream_t stream) {
  void* pointer = nullptr;
  const bool tracking = history_.tracking(c10::memoryProfilingEnabled());
  std::shared_ptr<c10::GatheredContext> context;
  std::optional<history_call_scope> call;
  if (tracking) {  // slow path: the stack is gathered before fragless runs
    context = history_.begin_allocation_call();
    call.emplace();
  }
  try {
    const std::uint64_t pool = pools_.route(device, stream);  // Note [Pool use counts]
    pointer = pool == 0 ? fragless::allocate(size_bytes, device, as_fragless(stream))
                        : fragless::allocate_from_pool(pool, size_bytes, as_fragless(stream));
  } catch (const fragless::out_of_memory_error&) {
    raise_out_of_memory(size_bytes, device, stream);
  } catch (const fragless::error& failure) {
    TORCH_CHECK(false, "fragless: allocation of ", size_bytes, " bytes on device ", device,
                " failed: ", failure.what());
  }
  if (pointer != nullptr && tracking) {
    history_.on_allocate(device, pointer, size_bytes, stream, std::move(context));
    report_to_profiler(pointer, static_cast<std::int64_t>(size_bytes), device);
  }
  return pointer;
}

void torch_allocator::raise_out_of_memory(std::size_t size_bytes, int device, cudaStream_t stream) {
  std::size_t device_free_bytes = 0;
  std::size_t device_total_bytes = 0;
  {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
    if (cudaMemGetInfo(&device_free_bytes, &device_total_bytes) != cudaSuccess) (void)cudaGetLastError();
  }
  device_stats stats = fragless::get_device_stats(device);
  checkpoints_.leave_held_out(stats, device);
  const auto allocated_bytes = static_cast<std::size_t>(stats.allocated_bytes[pool_all].current);
  out_of_memory_figures figures;
  figures.request_bytes = size_bytes;
  figures.device = device;
  figures.device_total_bytes = device_total_bytes;
  figures.device_free_bytes = device_free_bytes;
  figures.allocated_bytes = allocated_bytes;
  figures.reserved_bytes = static_cast<std::size_t>(stats.reserved_bytes[pool_all].current);
  try {
    for (const snapshot_segment& segment : fragless::snapshot(device).segments) {
      if (segment.private_pool == 0) continue;
      for (const snapshot_block& block : segment.blocks)
        if (block.state == block_state::free ||
            (block.state == block_state::allocated && checkpoints_.is_held(static_cast<std::uintptr_t>(block.address))))
          figures.private_pool_free_bytes += static_cast<std::size_t>(block.size_bytes);
    }
  } catch (const fragless::error&) {
    // Without a snapshot the message names no private-pool memory; the error is raised all the same.
  }
  {
    std::lock_guard lock(settings_mutex_);
    const auto index = static_cast<std::size_t>(device);
    if (index < fraction_set_.size() && fraction_set_[index])
      figures.allowed_bytes = static_cast<std::size_t>(memory_fractions_[index] * static_cast<double>(device_total_bytes));
  }
  const std::string message = out_of_memory_message(figures);
  history_.on_out_of_memory(device, size_bytes, device_free_bytes, stream);
  std::vector<c10_allocator::OutOfMemoryObserver> observers;
  {
    std::lock_guard lock(settings_mutex_);
    observers = oom_observers_;
  }
  // PyTorch's arguments: the request, and the allowed bytes in place of the total once a
  // memory fraction is set.
  const std::size_t observed_total_bytes = figures.allowed_bytes.value_or(device_total_bytes);
  for (const auto& observer : observers) observer(device, size_bytes, observed_total_bytes, device_free_bytes);
  c10::reportOutOfMemoryToProfiler(static_cast<std::int64_t>(size_bytes), allocated_bytes,
                                   static_cast<std::size_t>(stats.reserved_bytes[pool_all].current),
                                   c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device)));
  TORCH_CHECK_WITH(OutOfMemoryError, false, message);
}

void torch_allocator::report_to_profiler(void* pointer, std::int64_t signed_size_bytes, int device) noexcept {
  if (!c10::memoryProfilingEnabled()) return;
  try {
    const device_stats stats = fragless::get_device_stats(device);
    c10::reportMemoryUsageToProfiler(pointer, signed_size_bytes,
                                     static_cast<std::size_t>(stats.allocated_bytes[pool_all].current),
                                     static_cast<std::size_t>(stats.reserved_bytes[pool_all].current),
                                     c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device)));
  } catch (...) {
    // Free paths never throw; a lost profiler sample is the lesser harm.
  }
}

bool torch_allocator::free_block(void* pointer, bool warn_if_unknown) noexcept {
  if (pointer == nullptr) return true;
  std::optional<trace_history::freed_block> freed;
  try {
    if (history_.tracking(c10::memoryProfilingEnabled()) || history_.knows_blocks()) freed = history_.on_free(pointer);
    if (!checkpoints_.hold_on_free(pointer)) fragless::deallocate(pointer);  // Note [Pool checkpoints]
  } catch (const fragless::invalid_pointer_error& failure) {
    // Nothing changed (fragless checks first); the history knew no such block either.
    if (warn_if_unknown) TORCH_WARN("fragless: freeing ", pointer, " failed: ", failure.what());
    return false;
  } catch (const std::exception& failure) {
    TORCH_WARN("fragless: freeing ", pointer, " failed: ", failure.what());
    return true;
  }
  if (freed) report_to_profiler(pointer, -static_cast<std::int64_t>(freed->size_bytes), freed->device);
  return true;
}

void torch_allocator::delete_block(void* pointer) noexcept { instance().free_block(pointer); }

void torch_allocator::delete_uncached_block(void* pointer) noexcept { uncached_blocks::delete_block(pointer); }

c10::DataPtr torch_allocator::allocate(std::size_t size_bytes) {
  const int device = current_device();
  if (!enabled_.load(std::memory_order_relaxed)) {  // caching_allocator_enable(False): cudaMalloc per tensor
    void* uncached = uncached_.allocate(size_bytes, device);
    return {uncached, uncached, &torch_allocator::delete_uncached_block,
            c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device))};
  }
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
  void* pointer = allocate_block(size_bytes, device, stream);
  return {pointer, pointer, &torch_allocator::delete_block,
          c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device))};
}

c10::DeleterFnPtr torch_allocator::raw_deleter() const { return &torch_allocator::delete_block; }

void torch_allocator::copy_data(void* destination, const void* source, std::size_t count) const {
  C10_CUDA_CHECK(cudaMemcpy(destination, source, count, cudaMemcpyDeviceToDevice));
}

void* torch_allocator::raw_alloc(std::size_t size_bytes) {
  const int device = current_device();
  if (!enabled_.load(std::memory_order_relaxed)) return uncached_.allocate_raw(size_bytes, device);
  return allocate_block(size_bytes, device,
                        c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream());
}

void* torch_allocator::raw_alloc_with_stream(std::size_t size_bytes, cudaStream_t stream) {
  if (!enabled_.load(std::memory_order_relaxed)) return uncached_.allocate_raw(size_bytes, current_device());
  return allocate_block(size_bytes, current_device(), stream);
}

void torch_allocator::raw_delete(void* pointer) {
  if (uncached_.free_raw(pointer)) return;
  // PyTorch raises for a pointer it did not hand out (DataPtr deleters cannot raise).
  TORCH_CHECK(free_block(pointer, false), "invalid device pointer: ", pointer);
}

void torch_allocator::recordStream(const c10::DataPtr& data, c10::cuda::CUDAStream stream) {
  // Only blocks this adapter made (PyTorch does the same: views of other memory are ignored).
  if (data.get() == nullptr || data.get_deleter() != &torch_allocator::delete_block) return;
  try {
    fragless::record_stream(data.get(), as_fragless(stream.stream()));
  } catch (const fragless::error& failure) {
    TORCH_CHECK(false, "fragless: recordStream failed: ", failure.what());
  }
}

// ---- control and stats ----

bool torch_allocator::initialized() { return initialized_.load(); }

void torch_allocator::init(int device_count_hint) {
  std::lock_guard lock(settings_mutex_);
  if (memory_fractions_.size() < static_cast<std::size_t>(std::max(device_count_hint, 0)))
    memory_fractions_.resize(static_cast<std::size_t>(device_count_hint), 1.0);
  initialized_.store(true);
}

void torch_allocator::emptyCache(c10::MempoolId_t mempool_id) {
  history_.begin_release_call();  // Note [History contexts]: segment entries carry this stack
  history_call_scope call;
  if (is_default_pool(mempool_id)) {
    // PyTorch's rule: the devices' caches and released pools'; a live pool keeps its
    // memory (a captured graph may still use its free blocks).
    fragless::empty_cache_keeping_live_pools(-1);
    return;
  }
  // A live pool gives back its unused memory; a released one already did (releasePool).
  for (int device = 0; device < device_count(); ++device)
    if (const std::uint64_t pool = pools_.find(device, mempool_id)) fragless::empty_pool_cache(pool);
}

c10::CachingDeviceAllocator::DeviceStats torch_allocator::getDeviceStats(c10::DeviceIndex device) {
  return to_c10(visible_stats(device));
}

device_stats torch_allocator::visible_stats(int device) const {
  device_stats stats = fragless::get_device_stats(device);
  checkpoints_.leave_held_out(stats, device);  // Note [Pool checkpoints]
  return stats;
}

void torch_allocator::resetAccumulatedStats(c10::DeviceIndex device) { fragless::reset_accumulated_stats(device); }

void torch_allocator::resetPeakStats(c10::DeviceIndex device) { fragless::reset_peak_stats(device); }

double torch_allocator::getMemoryFraction(c10::DeviceIndex device) {
  std::lock_guard lock(settings_mutex_);
  const auto index = static_cast<std::size_t>(device);
  return index < memory_fractions_.size() ? memory_fractions_[index] : 1.0;
}

void torch_allocator::setMemoryFraction(double fraction, c10::DeviceIndex device) {
  TORCH_CHECK(fraction >= 0.0 && fraction <= 1.0, "invalid fraction:", fraction, ". Please set within [0, 1].");
  // fragless's core takes (0, 1]; the smallest positive fraction caps reserved memory at
  // 0 bytes, which is what 0 means to PyTorch: nothing more may be reserved.
  fragless::set_memory_fraction(fraction > 0.0 ? fraction : std::numeric_limits<double>::denorm_min(), device);
  std::lock_guard lock(settings_mutex_);
  const auto index = static_cast<std::size_t>(device);
  if (memory_fractions_.size() <= index) memory_fractions_.resize(index + 1, 1.0);
  if (fraction_set_.size() <= index) fraction_set_.resize(index + 1, false);
  memory_fractions_[index] = fraction;
  fraction_set_[index] = true;
}

std::vector<c10_allocator::StreamSegmentSize> torch_allocator::getExpandableSegmentSizes(c10::DeviceIndex) {
  // fragless's vmm backend maps pages into one reserved range per device, not one expandable
  // segment per stream and pool: there are no per-stream segment sizes to report.
  return {};
}

// caching_allocator_enable(False): later tensors are cudaMalloc'd one by one (uncached_blocks);
// blocks fragless handed out before still go back to fragless (their deleter says whose).
void torch_allocator::enable(bool value) { enabled_.store(value, std::memory_order_relaxed); }

bool torch_allocator::isEnabled() const { return enabled_.load(std::memory_order_relaxed); }

void torch_allocator::cacheInfo(c10::DeviceIndex device, std::size_t* largest_block_bytes) {
  // PyTorch reports the largest cached free block; the snapshot has the exact figure.
  std::size_t largest = 0;
  for (const snapshot_segment& segment : fragless::snapshot(device).segments)
    for (const snapshot_block& block : segment.blocks)
      if (block.state == block_state::free) largest = std::max(largest, static_cast<std::size_t>(block.size_bytes));
  if (largest_block_bytes != nullptr) *largest_block_bytes = largest;
}

void* torch_allocator::getBaseAllocation(void* pointer, std::size_t* size_bytes) {
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  for (int device = 0; device < device_count(); ++device) {
    for (const snapshot_segment& segment : fragless::snapshot(device).segments) {
      if (address >= segment.address && address < segment.address + segment.size_bytes) {
        if (size_bytes != nullptr) *size_bytes = static_cast<std::size_t>(segment.size_bytes);
        return reinterpret_cast<void*>(static_cast<std::uintptr_t>(segment.address));
      }
    }
  }
  TORCH_CHECK(false, "fragless: getBaseAllocation: ", pointer, " is not in memory fragless holds");
  return nullptr;  // not reached: TORCH_CHECK(false) throws (some builds cannot tell)
}

// ---- snapshot and history ----

c10_allocator::SnapshotInfo torch_allocator::snapshot(c10::MempoolId_t mempool_id, bool include_traces) {
  c10_allocator::SnapshotInfo info{};
  const int devices = device_count();
  for (int device = 0; device < devices; ++device) {
    memory_snapshot snap = fragless::snapshot(device);
    // The default id means every segment (PyTorch's rule); a pool id, that pool's only.
    std::vector<c10::MempoolId_t> owners;
    std::vector<snapshot_segment> kept;
    for (snapshot_segment& segment : snap.segments) {
      const c10::MempoolId_t owner = pools_.mempool_of(segment.private_pool);
      if (!is_default_pool(mempool_id) && owner != mempool_id) continue;
      owners.push_back(owner);
      kept.push_back(std::move(segment));
    }
    snap.segments = std::move(kept);
    auto segments = to_c10_segments(snap);
    for (std::size_t i = 0; i < segments.size(); ++i) {
      segments[i].owner_private_pool_id = owners[i];
      describe_blocks(segments[i]);
    }
    info.segments.insert(info.segments.end(), std::make_move_iterator(segments.begin()),
                         std::make_move_iterator(segments.end()));
    if (device == 0) {
      info.config_metadata.max_split_size =
          snap.max_split_size < 0 ? SIZE_MAX : static_cast<std::size_t>(snap.max_split_size);
      info.config_metadata.expandable_segments = fragless::backend_name(device) == "vmm";
      info.config_metadata.last_allocator_settings = snap.settings;
    }
  }
  if (include_traces) {
    info.device_traces = history_.entries(devices);
  } else {
    info.device_traces.resize(static_cast<std::size_t>(devices));
  }
  return info;
}

// Blocks as the user knows them: held checkpoint blocks free (Note [Pool checkpoints]),
// live ones with their allocation stack (Note [History contexts]).
void torch_allocator::describe_blocks(c10::CachingDeviceAllocator::SegmentInfo& segment) const {
  if (!history_.knows_blocks() && !checkpoints_.any_held()) return;
  std::uintptr_t address = segment.address;
  for (c10::CachingDeviceAllocator::BlockInfo& block : segment.blocks) {
    if (block.allocated && checkpoints_.is_held(address)) {
      block.allocated = false;
      block.active = false;
      segment.allocated_size -= block.size;
      segment.active_size -= block.size;
      segment.requested_size -= block.requested_size;
    } else if (block.allocated) {
      block.context_when_allocated = history_.context_of(reinterpret_cast<void*>(address));
    }
    address += block.size;
  }
}

bool torch_allocator::isHistoryEnabled() { return history_.enabled(); }

#if FRAGLESS_TORCH_HAS_CONTEXT_FOR_POINTER
std::shared_ptr<c10::GatheredContext> torch_allocator::getContextForPointer(const void* pointer) {
  return history_.context_of(pointer);
}
#endif

#if FRAGLESS_TORCH_HAS_USER_METADATA_SUPPORT
bool torch_allocator::supportsUserMetadata() { return true; }
#endif

void torch_allocator::setUserMetadata(const std::string& metadata) { trace_history::set_user_metadata(metadata); }

std::string torch_allocator::getUserMetadata() { return trace_history::user_metadata(); }

void torch_allocator::recordHistory(bool enabled, c10::CachingDeviceAllocator::CreateContextFn context_recorder,
                                    std::size_t alloc_trace_max_entries,
                                    c10::CachingDeviceAllocator::RecordContext when, bool clear_history,
                                    const std::vector<std::string>& skip_actions) {
  history_.configure(enabled, context_recorder, alloc_trace_max_entries, when, clear_history, skip_actions);
  // Segment events reach the history only while it records (Note [Segment events]).
  if (enabled)
    fragless::set_segment_observer(
        [](const fragless::segment_event& event, void* context) {
          static_cast<trace_history*>(context)->on_segment(event);
        },
        &history_);
  else
    fragless::set_segment_observer(nullptr, nullptr);
}

void torch_allocator::attachOutOfMemoryObserver(c10_allocator::OutOfMemoryObserver observer) {
  std::lock_guard lock(settings_mutex_);
  oom_observers_.push_back(std::move(observer));
}

#if FRAGLESS_TORCH_HAS_OOM_REJECTION_OBSERVER
void torch_allocator::attachOomRejectionObserver(c10_allocator::OomRejectionObserver) {
  // fragless never rejects an allocation pre-emptively, so this observer is never called.
}
#endif

void torch_allocator::attachAllocatorTraceTracker(c10::CachingDeviceAllocator::AllocatorTraceTracker tracker) {
  history_.add_tracker(std::move(tracker));
}

// ---- private pools (Note [Pool use counts]), IPC, checkpoints ----

void torch_allocator::beginAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t mempool_id,
                                          std::function<bool(cudaStream_t)> filter) {
  pools_.begin(device, mempool_id, std::move(filter));
#if !FRAGLESS_TORCH_HAS_CAPTURE_MARKS
  fragless::begin_capture();  // any pool routing may be a graph capture (Note [Torch versions])
#endif
}

void torch_allocator::endAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t mempool_id) {
  pools_.end(device, mempool_id);
#if !FRAGLESS_TORCH_HAS_CAPTURE_MARKS
  fragless::end_capture();
#endif
}

#if FRAGLESS_TORCH_HAS_CAPTURE_MARKS
// Note [Capture underway] (fragless core): no forbidden call while a capture runs.
// Without these hooks (older torch) see Note [Torch versions].
void torch_allocator::markCaptureBegin(c10::DeviceIndex) { fragless::begin_capture(); }

void torch_allocator::markCaptureEnd(c10::DeviceIndex) { fragless::end_capture(); }
#endif

void torch_allocator::releasePool(c10::DeviceIndex device, c10::MempoolId_t mempool_id) {
  pools_.release(device, mempool_id);
}

int torch_allocator::getPoolUseCount(c10::DeviceIndex device, c10::MempoolId_t mempool_id) {
  return pools_.use_count(device, mempool_id);
}

void torch_allocator::createOrIncrefPool(c10::DeviceIndex device, c10::MempoolId_t mempool_id,
                                         std::shared_ptr<CUDAAllocator> allocator) {
  TORCH_CHECK(allocator == nullptr,
              "fragless: a memory pool with an allocator of its own (such as ncclMemAlloc through "
              "CUDAPluggableAllocator) is not supported: fragless pools take their memory from fragless's "
              "device pages. Create the MemPool without an allocator.");
  pools_.create_or_incref(device, mempool_id);
}

void torch_allocator::setUseOnOOM(c10::DeviceIndex device, c10::MempoolId_t mempool_id, bool) {
  // Accepted for every pool, and always in effect: an out-of-memory anywhere releases every
  // pool's unused memory before it is reported (Note [Private pools]).
  pools_.require(device, mempool_id);
}

void torch_allocator::setNoSplit(c10::DeviceIndex, c10::MempoolId_t) {
  TORCH_CHECK(false, "fragless: no_split memory pools are not supported: fragless places blocks inside shared "
              "page-mapped ranges, so a block cannot be guaranteed a segment of its own (what NCCL buffer "
              "registration wants). Create the MemPool with no_split=False.");
}

bool torch_allocator::checkPoolLiveAllocations(c10::DeviceIndex device, c10::MempoolId_t mempool_id,
                                               const std::unordered_set<void*>& expected_live_allocations) {
  const std::uint64_t pool = pools_.find(device, mempool_id);
  TORCH_CHECK(pool != 0, "fragless: checkPoolLiveAllocations: no live memory pool (", mempool_id.first, ", ",
              mempool_id.second, ") on device ", static_cast<int>(device));
  std::size_t live = 0;
  for (const snapshot_segment& segment : fragless::snapshot(device).segments) {
    if (segment.private_pool != pool) continue;
    for (const snapshot_block& block : segment.blocks) {
      if (block.state != block_state::allocated) continue;
      if (checkpoints_.is_held(static_cast<std::uintptr_t>(block.address))) continue;  // freed by the user
      if (expected_live_allocations.count(reinterpret_cast<void*>(static_cast<std::uintptr_t>(block.address))) == 0)
        return false;
      ++live;
    }
  }
  return live == expected_live_allocations.size();
}

// Note [IPC in PyTorch]: the handle names the block itself (offset 0); getIpcDevPtr maps it
// once per handle and shares the mapping among the storages opened from it, closing it
// when the last one goes (PyTorch's receiving side does the same).
c10_allocator::ShareableHandle torch_allocator::shareIpcHandle(void* pointer) {
  try {
    return c10_allocator::ShareableHandle{0, fragless::export_block(pointer)};
  } catch (const fragless::error& failure) {
    TORCH_CHECK(false, "fragless: cannot share ", pointer, " with another process: ", failure.what());
  }
  return {};  // not reached: TORCH_CHECK(false) throws (some builds cannot tell)
}

std::shared_ptr<void> torch_allocator::getIpcDevPtr(std::string handle) {
  std::lock_guard lock(ipc_mutex_);
  if (auto found = opened_handles_.find(handle); found != opened_handles_.end())
    if (std::shared_ptr<void> alive = found->second.lock()) return alive;
  void* pointer = nullptr;
  try {
    pointer = fragless::import_block(handle);
  } catch (const fragless::error& failure) {
    TORCH_CHECK(false, "fragless: cannot open a memory handle from another process: ", failure.what());
  }
  std::shared_ptr<void> opened(pointer, [this, handle](void* mapped) {
    fragless::close_imported_block(mapped);
    std::lock_guard erase_lock(ipc_mutex_);
    auto found = opened_handles_.find(handle);
    if (found != opened_handles_.end() && found->second.expired()) opened_handles_.erase(found);
  });
  opened_handles_[handle] = opened;
  return opened;
}

// Note [Pool checkpoints]
std::shared_ptr<c10_allocator::AllocatorState> torch_allocator::getCheckpointState(c10::DeviceIndex device,
                                                                                    c10::MempoolId_t id) {
  const std::uint64_t pool = pools_.find(device, id);
  TORCH_CHECK(pool != 0, "fragless: getCheckpointState: no live memory pool (", id.first, ", ", id.second,
              ") on device ", static_cast<int>(device));
  try {
    return checkpoints_.take(device, id, pool);
  } catch (const fragless::error& failure) {
    TORCH_CHECK(false, "fragless: getCheckpointState failed: ", failure.what());
  }
  return nullptr;  // not reached: TORCH_CHECK(false) throws (some builds cannot tell)
}

c10_allocator::CheckpointDelta torch_allocator::setCheckpointPoolState(
    c10::DeviceIndex device, std::shared_ptr<c10_allocator::AllocatorState> state) {
  const auto* checkpoint = dynamic_cast<const pool_checkpoints::state*>(state.get());
  TORCH_CHECK(checkpoint != nullptr, "fragless: setCheckpointPoolState: not a state from fragless's getCheckpointState");
  TORCH_CHECK(checkpoint->device == static_cast<int>(device), "fragless: setCheckpointPoolState: the state is of device ",
              checkpoint->device, ", not ", static_cast<int>(device));
  TORCH_CHECK(pools_.find(device, checkpoint->id) == checkpoint->pool,
              "fragless: setCheckpointPoolState: the state's memory pool was released");
  pool_checkpoints::restore_result restored;
  try {
    restored = checkpoints_.restore(*checkpoint);
  } catch (const fragless::error& failure) {
    TORCH_CHECK(false, "fragless: setCheckpointPoolState failed: ", failure.what());
  }
  c10_allocator::CheckpointDelta delta;
  delta.ptrs_freed = restored.freed;
  // Blocks live now but not in the state are freed (held if another state names them).
  for (void* pointer : restored.freed)
    if (std::find(restored.allocated.begin(), restored.allocated.end(), pointer) == restored.allocated.end())
      free_block(pointer);
  const c10::Device where(c10::DeviceType::CUDA, device);
  for (void* pointer : restored.allocated) delta.dataptrs_allocd.emplace_back(pointer, pointer, &torch_allocator::delete_block, where);
  return delta;
}

// ---- peers ----

void torch_allocator::enablePeerAccess(c10::DeviceIndex device, c10::DeviceIndex device_to_access) {
  c10::cuda::CUDAGuard guard(device);
  const cudaError_t result = cudaDeviceEnablePeerAccess(device_to_access, 0);
  if (result == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError();
    return;
  }
  C10_CUDA_CHECK(result);
}

cudaError_t torch_allocator::memcpyAsync(void* destination, int destination_device, const void* source,
                                         int source_device, std::size_t count, cudaStream_t stream,
                                         bool p2p_enabled) {
  // Mapped (vmm) memory needs the Peer copy across devices unless peer access is enabled.
  if (p2p_enabled || destination_device == source_device)
    return cudaMemcpyAsync(destination, source, count, cudaMemcpyDeviceToDevice, stream);
  return cudaMemcpyPeerAsync(destination, destination_device, source, source_device, count, stream);
}

std::string torch_allocator::name() { return "fragless"; }

}  // namespace fragless::torch
