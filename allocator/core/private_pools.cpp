// Private pools (Note [Private pools] in private_pools.hpp).
#include "core/private_pools.hpp"

namespace fragless::core {
namespace {

// A pool's cache: the device's settings, but a range the size of the device (a pool never
// holds more than the device), and no thread of its own.
cache_settings pool_settings(cache_settings settings) {
  settings.virtual_range_factor = 1.0;
  settings.conf.background_compaction = false;
  return settings;
}

}  // namespace

private_pools::private_pools(backend::backend& device_backend, live_block_map& live_blocks,
                             const cache_settings& settings)
    : backend_(device_backend), live_blocks_(live_blocks), settings_(pool_settings(settings)) {}

private_pools::~private_pools() = default;

std::uint64_t private_pools::create(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::uint64_t pool = next_pool_++;
  for (const auto& candidate : entries_) {
    if (candidate->device != device || candidate->pool != 0) continue;
    if (candidate->cache->active_blocks() != 0) continue;  // a released pool's blocks are still in use
    candidate->pool = pool;
    candidate->cache->set_private_pool(pool);
    live_.emplace(pool, candidate.get());
    return pool;
  }
  auto created = std::make_unique<entry>();
  created->device = device;
  created->pool = pool;
  created->cache = std::make_unique<device_cache>(backend_, device, live_blocks_, settings_);
  created->cache->initialize();
  created->cache->set_private_pool(pool);
  live_.emplace(pool, created.get());
  entries_.push_back(std::move(created));
  count_.store(entries_.size(), std::memory_order_release);
  return pool;
}

device_cache& private_pools::cache_of(std::uint64_t pool) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = live_.find(pool);
  if (found == live_.end())
    throw invalid_argument_error("fragless: no private pool " + std::to_string(pool) +
                                 " (never created, or already released)");
  return *found->second->cache;
}

void private_pools::release(std::uint64_t pool) noexcept {
  device_cache* cache = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = live_.find(pool);
    if (found == live_.end()) return;
    found->second->pool = 0;
    cache = found->second->cache.get();
    live_.erase(found);
  }
  // Its cached memory goes back now (blocks still live free into the cache later, and stay
  // cached until empty_cache, memory pressure or the next pool takes the cache).
  cache->release_cache(0);
}

}  // namespace fragless::core
