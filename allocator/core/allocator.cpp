// The allocator object and the global instance (see allocator.hpp).
#include "core/allocator.hpp"

#include <algorithm>
#include <cstdio>

namespace fragless::core {

allocator::allocator(std::unique_ptr<backend::backend> device_backend, const cache_settings& settings)
    : backend_(std::move(device_backend)), settings_(settings), pools_(*backend_, live_blocks_, settings), ipc_(*backend_) {}

allocator::~allocator() = default;

device_cache& allocator::device(int device) {
  if (device >= 0 && device < kMaxDevices) {
    device_cache* found = devices_[device].load(std::memory_order_acquire);
    if (found != nullptr) return *found;  // hot path
  }
  std::lock_guard<std::mutex> lock(create_mutex_);
  if (device_count_ < 0) device_count_ = backend_->device_count();
  if (device < 0 || device >= device_count_ || device >= kMaxDevices)
    throw invalid_argument_error("fragless: no device " + std::to_string(device) + " (this process sees " +
                                 std::to_string(device_count_) + ")");
  device_cache* found = devices_[device].load(std::memory_order_acquire);
  if (found != nullptr) return *found;
  auto created = std::make_unique<device_cache>(*backend_, device, live_blocks_, settings_);
  created->initialize();
  found = created.get();
  owned_.push_back(std::move(created));
  devices_[device].store(found, std::memory_order_release);
  return *found;
}

void allocator::retire_stream(stream_id stream) noexcept {
  try {
    for (device_cache* cache : created_devices())
      for_each_cache(cache->device(), [&](device_cache& each) { each.retire_stream(stream); });
  } catch (...) {
  }
}

std::vector<device_cache*> allocator::created_devices() {
  std::vector<device_cache*> created;
  for (auto& slot : devices_)
    if (device_cache* found = slot.load(std::memory_order_acquire)) created.push_back(found);
  return created;
}

// Hot path: the try costs nothing until an allocation runs out of memory.
void* allocator::allocate(std::size_t size_bytes, int device_index, stream_id stream) {
  device_cache& cache = device(device_index);
  if (pools_.empty()) return cache.allocate(size_bytes, stream);
  return allocate_in(cache, size_bytes, stream);
}

std::uint64_t allocator::create_pool(int device_index) {
  device(device_index);  // checks the index; pools are created after their device's cache
  const std::uint64_t pool = pools_.create(device_index);
  // A recycled cache may carry an older cap: every pool gets the device's current one.
  const double fraction = memory_fractions_[static_cast<std::size_t>(device_index)].load();
  pools_.cache_of(pool).set_memory_fraction(fraction > 0.0 ? fraction : 1.0);
  return pool;
}

void allocator::set_memory_fraction(int device_index, double fraction) {
  device(device_index).set_memory_fraction(fraction);  // checks both arguments first
  memory_fractions_[static_cast<std::size_t>(device_index)].store(fraction);
  for_each_cache(device_index, [&](device_cache& cache) { cache.set_memory_fraction(fraction); });
}

void* allocator::allocate_from_pool(std::uint64_t pool, std::size_t size_bytes, stream_id stream) {
  return allocate_in(pools_.cache_of(pool), size_bytes, stream);
}

void* allocator::allocate_in(device_cache& cache, std::size_t size_bytes, stream_id stream) {
  try {
    return cache.allocate(size_bytes, stream);
  } catch (const out_of_memory_error&) {
    std::size_t released = 0;
    for_each_cache(cache.device(), [&](device_cache& other) {
      if (&other != &cache) released += other.release_cache(0);
    });
    if (released == 0) throw;
  }
  return cache.allocate(size_bytes, stream);
}

device_stats allocator::device_stats_of(int device_index, bool with_layout) {
  device_stats total;
  bool first = true;
  for_each_cache(device_index, [&](device_cache& cache) {
    if (first) total = cache.stats(with_layout);
    else accumulate(total, cache.stats(with_layout));
    first = false;
  });
  return total;
}

memory_snapshot allocator::snapshot(int device_index) {
  memory_snapshot combined;
  bool first = true;
  for_each_cache(device_index, [&](device_cache& cache) {
    memory_snapshot one = cache.snapshot();
    if (first) combined = std::move(one);
    else
      for (snapshot_segment& segment : one.segments) combined.segments.push_back(std::move(segment));
    first = false;
  });
  std::sort(combined.segments.begin(), combined.segments.end(),
            [](const snapshot_segment& a, const snapshot_segment& b) { return a.address < b.address; });
  return combined;
}

std::string allocator::export_block(void* pointer) {
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  device_cache* cache = nullptr;
  std::size_t bytes = 0;
  if (!live_blocks_.update(address, [&](live_block& block) {
        cache = block.cache;
        bytes = block.size_bytes;
      }))
    throw_invalid_pointer(pointer, "export");
  return ipc_.export_block(cache->device(), cache->uses_vmm(), address, bytes, cache->shared_pieces(address, bytes));
}

void allocator::throw_invalid_pointer(void* pointer, const char* operation) {
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  char text[64];
  std::snprintf(text, sizeof text, "%p", pointer);
  std::optional<std::uintptr_t> inside = live_blocks_.containing(address);
  if (inside)
    throw invalid_pointer_error(std::string("fragless: ") + operation + " of pointer " + text + ", which is " +
                                std::to_string(address - *inside) +
                                " bytes into a block: pass the pointer the allocation returned");
  throw invalid_pointer_error(std::string("fragless: ") + operation + " of pointer " + text +
                              ", which fragless did not allocate or has already freed");
}

void allocator::deallocate(void* pointer) {
  if (pointer == nullptr) return;
  std::optional<live_block> block = live_blocks_.take_for_free(reinterpret_cast<std::uintptr_t>(pointer));
  if (!block) throw_invalid_pointer(pointer, "free");
  if (ipc_.has_exports()) ipc_.on_free(reinterpret_cast<std::uintptr_t>(pointer));  // Note [IPC sharing]
  block->cache->free_block(reinterpret_cast<std::uintptr_t>(pointer), std::move(*block));
}

void allocator::record_stream(void* pointer, stream_id stream) {
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  int block_device = -1;
  if (!live_blocks_.update(address, [&](live_block& block) { block_device = block.device; }))
    throw_invalid_pointer(pointer, "record_stream");
  device(block_device).check_stream(stream);
  if (!live_blocks_.update(address, [&](live_block& block) {
        if (stream == block.stream) return;
        if (!block.other_streams) block.other_streams = std::make_unique<stream_set>();
        block.other_streams->insert(stream);
      }))
    throw_invalid_pointer(pointer, "record_stream");
}

}  // namespace fragless::core
