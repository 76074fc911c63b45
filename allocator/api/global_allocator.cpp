// The process-wide allocator behind the public APIs: the CUDA backend plus settings from
// FRAGLESS_CONF, created on first use and never destroyed (see allocator.hpp). When the
// publish_stats option is on, it also publishes every device's stats for fragless-stats
// (Note [Publishing stats] in fragless/stats_publisher.hpp) from a background thread.
#include <atomic>
#include <vector>

#include "api/runtime_functions.hpp"
#include "backend/capture_aware_backend.hpp"
#include "core/allocator.hpp"
#include "core/log.hpp"
#include "core/size_classes.hpp"
#include "fragless/stats_publisher.hpp"

namespace fragless::core {
namespace {

// Every 100 ms: publish each device's counters (cheap: no snapshot), and answer
// fragless-stats' snapshot requests. Layout figures (segments, inactive splits, largest
// free block -- read off a snapshot) are refreshed once a second and carried in between,
// so fragless-stats never shows a fragmentation computed from a missing largest block.
constexpr int kLayoutEveryTicks = 10;

void carry_layout(const device_stats& from, device_stats& to) noexcept {
  to.segment = from.segment;
  to.inactive_split = from.inactive_split;
  to.inactive_split_bytes = from.inactive_split_bytes;
  to.largest_free_block_bytes = from.largest_free_block_bytes;
}

void start_publishing(allocator& instance) {
  stats_publisher* publisher =
      stats_publisher::create([](std::string_view message) { log_message(log_level::warn, std::string(message)); })
          .release();  // lives as long as the allocator: never destroyed
  if (publisher == nullptr) return;
  publisher->start_background_thread(
      [&instance, tick = 0, last_layout = std::vector<device_stats>()](stats_publisher& target) mutable {
        const bool with_layout = tick++ % kLayoutEveryTicks == 0;
        for (device_cache* cache : instance.created_devices()) {
          const auto index = static_cast<std::size_t>(cache->device());
          if (last_layout.size() <= index) last_layout.resize(index + 1);
          device_stats stats = instance.device_stats_of(cache->device(), with_layout);  // with its pools
          if (with_layout) last_layout[index] = stats;
          else carry_layout(last_layout[index], stats);
          target.publish(cache->device(), stats);
        }
      },
      [&instance] {
        memory_snapshot combined;
        for (device_cache* cache : instance.created_devices()) {
          memory_snapshot one = instance.snapshot(cache->device());
          combined.device_count = std::max(combined.device_count, one.device_count);
          for (snapshot_segment& segment : one.segments) combined.segments.push_back(std::move(segment));
        }
        return combined;
      });
}

}  // namespace

namespace {
std::atomic<allocator*> created_instance{nullptr};
}  // namespace

allocator* global_allocator_if_created() noexcept { return created_instance.load(std::memory_order_acquire); }

allocator& global_allocator() {
  static allocator* const instance = [] {
    std::unique_ptr<backend::backend> cuda = backend::make_capture_aware(backend::make_cuda_backend());
    if (!cuda) throw device_error("fragless: the CUDA runtime could not be initialised");
    cache_settings settings;
    settings.conf = options_from_environment();
    // Note [Narrower options]: small_max_bytes above the largest size class.
    if (settings.conf.small_max_bytes > kSmallLimitBytes && settings.conf.small_max_bytes != options{}.small_max_bytes)
      log_message(log_level::warn, "small_max_bytes " + std::to_string(settings.conf.small_max_bytes) +
                                       " is above the largest size class (65536 bytes): requests above 64 KiB "
                                       "are served by the large pool");
    auto* created = new allocator(std::move(cuda), settings);
    if (settings.conf.publish_stats) start_publishing(*created);
    created_instance.store(created, std::memory_order_release);
    return created;
  }();
  return *instance;
}

}  // namespace fragless::core

namespace fragless::api {

void use_real_runtime_functions(void* malloc_function, void* free_function, void* mem_get_info_function) noexcept {
  backend::runtime_memory_functions functions;
  functions.malloc = malloc_function;
  functions.free = free_function;
  functions.mem_get_info = mem_get_info_function;
  backend::use_runtime_memory_functions(functions);
}

}  // namespace fragless::api
