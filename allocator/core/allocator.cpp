// The allocator object and the global instance (see allocator.hpp).
#include "core/allocator.hpp"

#include <cstdio>

namespace fragless::core {

allocator::allocator(std::unique_ptr<backend::backend> device_backend, const cache_settings& settings)
    : backend_(std::move(device_backend)), settings_(settings) {}

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

std::vector<device_cache*> allocator::created_devices() {
  std::vector<device_cache*> created;
  for (auto& slot : devices_)
    if (device_cache* found = slot.load(std::memory_order_acquire)) created.push_back(found);
  return created;
}

void* allocator::allocate(std::size_t size_bytes, int device_index, stream_id stream) {
  return device(device_index).allocate(size_bytes, stream);
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
  std::optional<live_block> block = live_blocks_.take(reinterpret_cast<std::uintptr_t>(pointer));
  if (!block) throw_invalid_pointer(pointer, "free");
  device_cache* cache = devices_[block->device].load(std::memory_order_acquire);
  cache->free_block(reinterpret_cast<std::uintptr_t>(pointer), std::move(*block));
}

void allocator::record_stream(void* pointer, stream_id stream) {
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  int block_device = -1;
  if (!live_blocks_.update(address, [&](live_block& block) { block_device = block.device; }))
    throw_invalid_pointer(pointer, "record_stream");
  device(block_device).check_stream(stream);
  if (!live_blocks_.update(address, [&](live_block& block) {
        if (stream != block.stream) block.other_streams.insert(stream);
      }))
    throw_invalid_pointer(pointer, "record_stream");
}

}  // namespace fragless::core
