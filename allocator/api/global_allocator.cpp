// The process-wide allocator behind the public APIs: the CUDA backend plus settings from
// FRAGLESS_CONF, created on first use and never destroyed (see allocator.hpp). When the
// publish_stats option is on, it also publishes every device's stats for fragless-stats
// (Note [Publishing stats] in fragless/stats_publisher.hpp) from a background thread.
#include "core/allocator.hpp"
#include "core/log.hpp"
#include "fragless/stats_publisher.hpp"

namespace fragless::core {
namespace {

// Every 100 ms: publish each device's counters (cheap: no snapshot), and answer
// fragless-stats' snapshot requests.
void start_publishing(allocator& instance) {
  stats_publisher* publisher =
      stats_publisher::create([](std::string_view message) { log_message(log_level::warn, std::string(message)); })
          .release();  // lives as long as the allocator: never destroyed
  if (publisher == nullptr) return;
  publisher->start_background_thread(
      [&instance](stats_publisher& target) {
        for (device_cache* cache : instance.created_devices()) target.publish(cache->device(), cache->stats(false));
      },
      [&instance] {
        memory_snapshot combined;
        for (device_cache* cache : instance.created_devices()) {
          memory_snapshot one = cache->snapshot();
          combined.device_count = std::max(combined.device_count, one.device_count);
          for (snapshot_segment& segment : one.segments) combined.segments.push_back(std::move(segment));
        }
        return combined;
      });
}

}  // namespace

allocator& global_allocator() {
  static allocator* const instance = [] {
    std::unique_ptr<backend::backend> cuda = backend::make_cuda_backend();
    if (!cuda) throw device_error("fragless: the CUDA runtime could not be initialised");
    const options values = options_from_environment();
    auto* created = new allocator(std::move(cuda), settings_from_options(values));
    if (values.publish_stats) start_publishing(*created);
    return created;
  }();
  return *instance;
}

}  // namespace fragless::core
