// fragless as c10's CUDA allocator, exercised through c10's own interface on simcuda:
// installation into both registries, DataPtr / raw allocation, streams, stats equal to
// fragless's, snapshots consistent with the stats, history, OOM, profiler reports, the
// documented refusals, and the snapshot pickle read back by the bench's pickle reader
// (private pools, IPC and pool checkpoints: torch_pool_test.cpp).
#include <c10/core/Allocator.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <torch/headeronly/version.h>
#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "fragless/fragless.hpp"
#include "fragless/torch.hpp"
#include "simcuda/control.h"
#include "torch_allocator_test_support.hpp"
#include "torch_test_support.hpp"
#if defined(FRAGLESS_HAVE_TRACES)
#include "pickle_reader.hpp"
#endif

namespace {

namespace allocator = c10::cuda::CUDACachingAllocator;
using c10::CachingDeviceAllocator::TraceEntry;
using fragless::torch_test::kAll;
using fragless::torch_test::require_installed;

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

// A profiler stand-in: collects what allocators report through c10::reportMemoryUsageToProfiler.
struct recording_reporter : c10::MemoryReportingInfoBase {
  struct report {
    void* pointer;
    std::int64_t size_bytes;
    std::size_t total_allocated;
  };
  std::vector<report> reports;
  void reportMemoryUsage(void* pointer, std::int64_t size_bytes, std::size_t total_allocated, std::size_t,
                         c10::Device) override {
    reports.push_back({pointer, size_bytes, total_allocated});
  }
  bool memoryProfilingEnabled() const override { return true; }
};

}  // namespace

TEST_CASE("torch install: fragless in both c10 registries, second install refused") {
  require_installed();
  CHECK(fragless::torch::is_installed());
  CHECK(allocator::get()->name() == "fragless");
  CHECK(c10::GetAllocator(c10::DeviceType::CUDA) == static_cast<c10::Allocator*>(allocator::get()));
  CHECK_THROWS_AS(fragless::torch::install(), fragless::torch::install_error);
  char message[128] = {};
  CHECK(fragless_torch_install(message, sizeof message) == 1);
  CHECK(std::string(message).find("already installed") != std::string::npos);
}

TEST_CASE("torch allocator: DataPtr and raw allocations come from fragless") {
  require_installed();
  const auto before = fragless::get_device_stats(0);
  {
    c10::DataPtr data = c10::GetAllocator(c10::DeviceType::CUDA)->allocate(3u << 20);
    REQUIRE(data.get() != nullptr);
    CHECK(data.device() == c10::Device(c10::DeviceType::CUDA, 0));
    CHECK(simcuda_is_accessible(data.get(), 3u << 20) == 1);
    std::vector<unsigned char> pattern(4096, 0xA5), back(4096, 0);
    REQUIRE(cudaMemcpy(data.get(), pattern.data(), pattern.size(), cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(cudaMemcpy(back.data(), data.get(), back.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(back == pattern);
    const auto during = fragless::get_device_stats(0);
    CHECK(during.allocation[kAll].current == before.allocation[kAll].current + 1);
    CHECK(during.requested_bytes[kAll].current == before.requested_bytes[kAll].current + (3 << 20));
  }
  CHECK(fragless::get_device_stats(0).allocation[kAll].current == before.allocation[kAll].current);

  void* raw = allocator::raw_alloc(1000);
  REQUIRE(raw != nullptr);
  CHECK(reinterpret_cast<std::uintptr_t>(raw) % 512 == 0);
  CHECK(fragless::get_device_stats(0).allocation[kAll].current == before.allocation[kAll].current + 1);
  std::size_t base_size = 0;
  void* base = allocator::getBaseAllocation(raw, &base_size);
  CHECK(reinterpret_cast<std::uintptr_t>(base) <= reinterpret_cast<std::uintptr_t>(raw));
  CHECK(reinterpret_cast<std::uintptr_t>(raw) + 1000 <= reinterpret_cast<std::uintptr_t>(base) + base_size);
  allocator::raw_delete(raw);
  CHECK(fragless::get_device_stats(0).allocation[kAll].current == before.allocation[kAll].current);
  CHECK_THROWS_AS(allocator::getBaseAllocation(&base_size, nullptr), c10::Error);  // host memory
}

TEST_CASE("torch allocator: recordStream and raw_alloc_with_stream") {
  require_installed();
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
  // Past the device's first small requests, which are placed exactly in the shared large
  // pool (Note [Exact start]): once the program reserved more than a small program does
  // and made more than exact_start_allocations small requests (1024,
  // allocator/core/cache_settings.hpp) while still calling the device in their second
  // half, small blocks live in their stream's slabs.
  allocator::raw_delete(allocator::raw_alloc(std::size_t{65} << 20));
  for (int i = 0; i < 1025; ++i) {
    allocator::raw_delete(allocator::raw_alloc(512));
    if (i == 700) allocator::raw_delete(allocator::raw_alloc(std::size_t{130} << 20));  // device calls
  }
  void* on_side = allocator::raw_alloc_with_stream(8192, side.stream());
  REQUIRE(on_side != nullptr);
  const auto streams_before = fragless::snapshot(0);
  bool found_on_side = false;
  for (const auto& segment : streams_before.segments)
    for (const auto& block : segment.blocks)
      if (block.address == reinterpret_cast<std::uintptr_t>(on_side))
        found_on_side = segment.stream == reinterpret_cast<std::uintptr_t>(side.stream());
  CHECK(found_on_side);  // the block lives in a segment of the stream it was allocated on
  allocator::raw_delete(on_side);

  c10::DataPtr data = allocator::get()->allocate(1u << 20);
  REQUIRE(cudaMemsetAsync(data.get(), 1, 1u << 20, side.stream()) == cudaSuccess);
  CHECK_NOTHROW(allocator::recordStream(data, side));
  // A DataPtr fragless did not make is ignored, as the native allocator does.
  int host_value = 0;
  c10::DataPtr foreign(&host_value, c10::Device(c10::DeviceType::CUDA, 0));
  CHECK_NOTHROW(allocator::recordStream(foreign, side));
  data.clear();
  REQUIRE(cudaStreamSynchronize(side.stream()) == cudaSuccess);
}

TEST_CASE("torch allocator: getDeviceStats is fragless's stats field by field") {
  require_installed();
  void* a = allocator::raw_alloc(5000);
  void* b = allocator::raw_alloc(12u << 20);
  allocator::raw_delete(a);
  const auto theirs = allocator::getDeviceStats(0);
  const auto ours = fragless::get_device_stats(0);
  auto same = [](const c10::CachingAllocator::StatArray& c10_stat, const fragless::pool_stat& fragless_stat) {
    for (std::size_t pool = 0; pool < 3; ++pool) {
      if (c10_stat[pool].current != fragless_stat[pool].current || c10_stat[pool].peak != fragless_stat[pool].peak ||
          c10_stat[pool].allocated != fragless_stat[pool].allocated || c10_stat[pool].freed != fragless_stat[pool].freed)
        return false;
    }
    return true;
  };
  CHECK(same(theirs.allocation, ours.allocation));
  CHECK(same(theirs.segment, ours.segment));
  CHECK(same(theirs.active, ours.active));
  CHECK(same(theirs.inactive_split, ours.inactive_split));
  CHECK(same(theirs.allocated_bytes, ours.allocated_bytes));
  CHECK(same(theirs.reserved_bytes, ours.reserved_bytes));
  CHECK(same(theirs.active_bytes, ours.active_bytes));
  CHECK(same(theirs.inactive_split_bytes, ours.inactive_split_bytes));
  CHECK(same(theirs.requested_bytes, ours.requested_bytes));
  CHECK(theirs.num_device_alloc == ours.num_device_alloc);
  CHECK(theirs.num_ooms == ours.num_ooms);
  CHECK(theirs.max_split_size == ours.max_split_size);
  CHECK(theirs.allocated_bytes[kAll].current >= static_cast<std::int64_t>(12u << 20));

  allocator::resetPeakStats(0);
  CHECK(allocator::getDeviceStats(0).allocated_bytes[kAll].peak ==
        allocator::getDeviceStats(0).allocated_bytes[kAll].current);
  allocator::resetAccumulatedStats(0);
  CHECK(allocator::getDeviceStats(0).allocated_bytes[kAll].allocated == 0);
  allocator::raw_delete(b);
}

TEST_CASE("torch allocator: snapshot agrees with the stats; cacheInfo; emptyCache") {
  require_installed();
  void* a = allocator::raw_alloc(700);
  void* b = allocator::raw_alloc(3u << 20);
  void* c = allocator::raw_alloc(25u << 20);
  allocator::raw_delete(b);
  const auto info = allocator::snapshot();
  const auto stats = allocator::getDeviceStats(0);
  std::size_t reserved = 0, allocated = 0, active = 0, largest_free = 0;
  for (const auto& segment : info.segments) {
    reserved += segment.total_size;
    allocated += segment.allocated_size;
    active += segment.active_size;
    std::size_t covered = 0;
    for (const auto& block : segment.blocks) {
      covered += block.size;
      if (!block.active) largest_free = std::max(largest_free, block.size);
    }
    CHECK(covered == segment.total_size);
  }
  CHECK(static_cast<std::int64_t>(reserved) == stats.reserved_bytes[kAll].current);
  CHECK(static_cast<std::int64_t>(allocated) == stats.allocated_bytes[kAll].current);
  CHECK(static_cast<std::int64_t>(active) == stats.active_bytes[kAll].current);
  CHECK(info.device_traces.size() == static_cast<std::size_t>(c10::cuda::device_count()));
  std::size_t cache_largest = 0;
  allocator::cacheInfo(0, &cache_largest);
  CHECK(cache_largest == largest_free);
  CHECK(cache_largest > 0);  // b's block is free in the cache

  allocator::raw_delete(a);
  allocator::raw_delete(c);
  allocator::emptyCache();
  CHECK(allocator::getDeviceStats(0).reserved_bytes[kAll].current == 0);
  CHECK(simcuda_used_bytes(0) == 0);
}

namespace {
bool is_segment_action(TraceEntry::Action action) {
  return action == TraceEntry::SEGMENT_MAP || action == TraceEntry::SEGMENT_UNMAP ||
         action == TraceEntry::SEGMENT_ALLOC || action == TraceEntry::SEGMENT_FREE;
}
std::vector<TraceEntry> block_entries(const std::vector<TraceEntry>& entries) {
  std::vector<TraceEntry> kept;
  for (const TraceEntry& entry : entries)
    if (!is_segment_action(entry.action_)) kept.push_back(entry);
  return kept;
}
}  // namespace

TEST_CASE("torch allocator: history records alloc and free; trace trackers see them") {
  require_installed();
  // Trackers cannot be detached: the tracker owns what it writes to, so it outlives this test.
  auto tracked = std::make_shared<std::vector<TraceEntry::Action>>();
  allocator::get()->attachAllocatorTraceTracker([tracked](const TraceEntry& entry) {
    if (!is_segment_action(entry.action_)) tracked->push_back(entry.action_);
  });
  allocator::get()->recordHistory(true, nullptr, 100, c10::CachingDeviceAllocator::RecordContext::ALLOC, true, {});
  CHECK(allocator::get()->isHistoryEnabled());
  void* block = allocator::raw_alloc(4096);
  allocator::raw_delete(block);
  const auto traces = block_entries(allocator::snapshot().device_traces.at(0));
  REQUIRE(traces.size() == 3);
  CHECK(traces[0].action_ == TraceEntry::ALLOC);
  CHECK(traces[0].addr_ == reinterpret_cast<std::uintptr_t>(block));
  CHECK(traces[0].size_ == 4096);
  CHECK(traces[1].action_ == TraceEntry::FREE_REQUESTED);
  CHECK(traces[2].action_ == TraceEntry::FREE_COMPLETED);
  CHECK(tracked->size() == 3);

  // A bounded ring keeps the newest entries, oldest first.
  allocator::get()->recordHistory(true, nullptr, 4, c10::CachingDeviceAllocator::RecordContext::ALLOC, true, {});
  std::vector<void*> blocks;
  allocator::emptyCache();  // no page is mapped: the first block maps one (4 entries in all)
  for (int i = 0; i < 3; ++i) blocks.push_back(allocator::raw_alloc(1024 * (i + 1)));
  const auto bounded = allocator::snapshot().device_traces.at(0);
  REQUIRE(bounded.size() == 4);
  for (void* p : blocks) allocator::raw_delete(p);
  const auto wrapped = allocator::snapshot().device_traces.at(0);
  REQUIRE(wrapped.size() == 4);
  CHECK(wrapped.back().action_ == TraceEntry::FREE_COMPLETED);
  CHECK(wrapped.back().addr_ == reinterpret_cast<std::uintptr_t>(blocks.back()));
  allocator::get()->recordHistory(false, nullptr, 0, c10::CachingDeviceAllocator::RecordContext::NEVER, true, {});
  CHECK_FALSE(allocator::get()->isHistoryEnabled());
}

TEST_CASE("torch allocator: history has the segment_map and segment_unmap entries of the pages") {
  require_installed();
  allocator::emptyCache();
  allocator::get()->recordHistory(true, nullptr, 10000, c10::CachingDeviceAllocator::RecordContext::ALLOC, true, {});
  void* block = allocator::raw_alloc(32u << 20);
  const auto block_address = reinterpret_cast<std::uintptr_t>(block);
  std::uint64_t mapped_over_block = 0;
  const auto after_alloc = allocator::snapshot();  // a named snapshot: the loop reads into it
  for (const TraceEntry& entry : after_alloc.device_traces.at(0))
    if (entry.action_ == TraceEntry::SEGMENT_MAP && entry.addr_ < block_address + (32u << 20) &&
        entry.addr_ + entry.size_ > block_address)
      mapped_over_block += entry.size_;
  CHECK(mapped_over_block >= (32u << 20));  // every page under the block was mapped while recording
  allocator::raw_delete(block);
  const fragless::compact_result compacted = fragless::compact(0);
  REQUIRE(compacted.unmapped_pages > 0);
  std::uint64_t unmapped = 0;
  const auto after_compact = allocator::snapshot();
  for (const TraceEntry& entry : after_compact.device_traces.at(0))
    if (entry.action_ == TraceEntry::SEGMENT_UNMAP) unmapped += entry.size_;
  CHECK(unmapped == compacted.unmapped_pages * (2u << 20));
  allocator::get()->recordHistory(false, nullptr, 0, c10::CachingDeviceAllocator::RecordContext::NEVER, true, {});
  // Not recording: no more entries, and no observer cost.
  void* quiet = allocator::raw_alloc(8u << 20);
  allocator::raw_delete(quiet);
  CHECK(allocator::snapshot().device_traces.at(0).empty());
}

TEST_CASE("torch allocator: OOM is c10::OutOfMemoryError with PyTorch's message, observers called") {
  require_installed();
  // Observers stay attached for the process (as in PyTorch): a later test's out-of-memory
  // calls this one too, so it must not point into this test's stack.
  const auto observed = std::make_shared<int>(0);
  allocator::get()->attachOutOfMemoryObserver([observed](int64_t, std::size_t, std::size_t, std::size_t) { ++*observed; });
  const auto ooms_before = allocator::getDeviceStats(0).num_ooms;
  try {
    allocator::raw_alloc(std::size_t{1} << 50);
    FAIL("a 1 PiB allocation succeeded");
  } catch (const c10::OutOfMemoryError& oom) {
    // PyTorch's units: GiB however large (1 PiB is 1048576.00 GiB), never TiB.
    CHECK(starts_with(oom.msg(), "CUDA out of memory. Tried to allocate 1048576.00 GiB. GPU 0 has a total capacity of "));
    CHECK_THAT(oom.msg(), Catch::Contains(" is allocated by PyTorch, and "));
  }
  CHECK(*observed == 1);
  CHECK(allocator::getDeviceStats(0).num_ooms == ooms_before + 1);
}

TEST_CASE("torch allocator: profiler reports every allocation and free") {
  require_installed();
  auto reporter = std::make_shared<recording_reporter>();
  {
    c10::DebugInfoGuard guard(c10::DebugInfoKind::PROFILER_STATE, reporter);
    REQUIRE(c10::memoryProfilingEnabled());
    c10::DataPtr data = allocator::get()->allocate(10000);
    void* pointer = data.get();
    data.clear();
    REQUIRE(reporter->reports.size() == 2);
    CHECK(reporter->reports[0].pointer == pointer);
    CHECK(reporter->reports[0].size_bytes == 10000);
    CHECK(reporter->reports[0].total_allocated >= 10000);
    CHECK(reporter->reports[1].pointer == pointer);
    CHECK(reporter->reports[1].size_bytes == -10000);
  }
}

TEST_CASE("torch allocator: unsupported features fail with an explanation") {
  require_installed();
  auto message_of = [](auto&& call) -> std::string {
    try {
      call();
    } catch (const c10::Error& failure) {
      return failure.msg();
    }
    return "";
  };
  CHECK_THAT(message_of([] { allocator::get()->shareIpcHandle(nullptr); }), Catch::Contains("cannot share"));
  CHECK_THAT(message_of([] { allocator::get()->getIpcDevPtr("x"); }), Catch::Contains("not a fragless IPC handle"));
  CHECK_THAT(message_of([] { allocator::get()->setNoSplit(0, {0, 77}); }), Catch::Contains("no_split"));
  CHECK_THAT(message_of([] { allocator::get()->getCheckpointState(0, {0, 77}); }), Catch::Contains("no live memory pool"));
  CHECK_THAT(message_of([] { allocator::get()->endAllocateToPool(0, {0, 77}); }), Catch::Contains("not routing"));
  CHECK_THAT(message_of([] { allocator::get()->releasePool(0, {0, 77}); }), Catch::Contains("no memory pool"));
  CHECK(allocator::get()->isEnabled());
}

// Note [Torch versions]: the probes must find the whole API on the newest supported torch
// (a probe that broke would silently drop behaviour) and none of it on 2.11.
TEST_CASE("torch versions: the detected API matches the torch built against") {
  constexpr int minor = TORCH_VERSION_MINOR;
  INFO("torch " << TORCH_VERSION);
  const bool detected[] = {FRAGLESS_TORCH_HAS_OOM_REJECTIONS != 0, FRAGLESS_TORCH_HAS_OOM_REJECTION_OBSERVER != 0,
                           FRAGLESS_TORCH_HAS_CAPTURE_MARKS != 0, FRAGLESS_TORCH_HAS_ANNOTATE_ENTRY != 0,
                           FRAGLESS_TORCH_HAS_CONTEXT_FOR_POINTER != 0, FRAGLESS_TORCH_HAS_USER_METADATA_SUPPORT != 0};
  for (const bool has : detected) {
    if (minor >= 15) CHECK(has);
    if (minor <= 11) CHECK_FALSE(has);
  }
}

#if FRAGLESS_TORCH_HAS_CAPTURE_MARKS
TEST_CASE("torch allocator: markCaptureBegin/End hold back releases until the capture ends") {
  require_installed();
  allocator::emptyCache();
  void* block = allocator::raw_alloc(4u << 20);
  allocator::raw_delete(block);
  const auto cached = allocator::getDeviceStats(0).reserved_bytes[kAll].current;
  REQUIRE(cached > 0);
  allocator::markCaptureBegin(0);  // through c10's registry: the override must be reached
  allocator::emptyCache();
  CHECK(allocator::getDeviceStats(0).reserved_bytes[kAll].current == cached);
  allocator::markCaptureEnd(0);
  allocator::emptyCache();
  CHECK(allocator::getDeviceStats(0).reserved_bytes[kAll].current == 0);
}
#endif

TEST_CASE("torch allocator: memory fraction round trip") {
  require_installed();
  CHECK(allocator::getMemoryFraction(0) == 1.0);
  allocator::setMemoryFraction(0.5, 0);
  CHECK(allocator::getMemoryFraction(0) == 0.5);
  CHECK_THROWS_AS(allocator::setMemoryFraction(1.5, 0), c10::Error);
  // 0 is PyTorch's "nothing more may be reserved": cached memory is still reused.
  void* cached = allocator::raw_alloc(1u << 20);
  allocator::raw_delete(cached);
  allocator::setMemoryFraction(0.0, 0);
  CHECK(allocator::getMemoryFraction(0) == 0.0);
  void* reused = allocator::raw_alloc(1u << 20);
  CHECK(reused != nullptr);
  allocator::raw_delete(reused);
  allocator::emptyCache();
  CHECK_THROWS_AS(allocator::raw_alloc(1u << 20), c10::OutOfMemoryError);
  allocator::setMemoryFraction(1.0, 0);
  void* after = allocator::raw_alloc(1u << 20);
  CHECK(after != nullptr);
  allocator::raw_delete(after);
}

TEST_CASE("torch allocator: disabled, allocations are cudaMalloc per tensor outside fragless") {
  require_installed();
  c10::DataPtr cached = allocator::get()->allocate(1u << 20);
  const auto before = allocator::getDeviceStats(0);
  allocator::get()->enable(false);
  CHECK_FALSE(allocator::get()->isEnabled());
  {
    c10::DataPtr uncached = allocator::get()->allocate(1u << 20);
    REQUIRE(uncached.get() != nullptr);
    CHECK(uncached.get_deleter() != allocator::get()->raw_deleter());
    CHECK(simcuda_is_accessible(uncached.get(), 1u << 20) == 1);
    void* raw = allocator::raw_alloc(4096);
    CHECK(allocator::getDeviceStats(0).allocated_bytes[kAll].current == before.allocated_bytes[kAll].current);
    allocator::raw_delete(raw);
    cached.clear();  // a block fragless handed out before still goes back to fragless
    CHECK(allocator::getDeviceStats(0).allocated_bytes[kAll].current < before.allocated_bytes[kAll].current);
  }
  allocator::get()->enable(true);
  CHECK(allocator::get()->isEnabled());
  c10::DataPtr again = allocator::get()->allocate(1u << 20);
  CHECK(again.get_deleter() == allocator::get()->raw_deleter());
}

#if defined(FRAGLESS_HAVE_TRACES)
TEST_CASE("torch allocator: fragless's snapshot pickle reads back with the bench pickle reader") {
  require_installed();
  void* a = allocator::raw_alloc(2000);
  void* b = allocator::raw_alloc(6u << 20);
  const auto expected = fragless::snapshot(0);
  const auto document = fragless::traces::read_pickle(fragless::snapshot_pickle(0));
  const auto* segments = document.root().find("segments");
  REQUIRE(segments != nullptr);
  REQUIRE(segments->items().size() == expected.segments.size());
  for (std::size_t i = 0; i < expected.segments.size(); ++i) {
    const auto& segment = segments->items()[i];
    REQUIRE(segment.find("address") != nullptr);
    CHECK(static_cast<std::uint64_t>(segment.find("address")->int_value) == expected.segments[i].address);
    CHECK(static_cast<std::uint64_t>(segment.find("total_size")->int_value) == expected.segments[i].size_bytes);
    CHECK(segment.find("blocks")->items().size() == expected.segments[i].blocks.size());
  }
  allocator::raw_delete(a);
  allocator::raw_delete(b);
}
#endif
