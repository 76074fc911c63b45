// Note [Capture underway], with a fake backend (no CUDA): while a capture is underway the
// device receives no event query, synchronization, release or cross-stream wait -- whatever the allocator is
// asked to do (allocations that map pages, cross-stream frees, empty_cache, compaction, an
// out-of-memory) -- and once it ends, held-back work completes and memory goes back.
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <string>

#include "backend/capture_aware_backend.hpp"
#include "consistency.hpp"
#include "core/allocator.hpp"
#include "fake_backend.hpp"

using namespace fragless;
using fragless::testing::fake_backend;

namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

// Counts the calls capture forbids, then forwards to the fake backend.
class counting_backend final : public fragless::backend::backend {
 public:
  explicit counting_backend(fake_backend* inner) : inner_(inner) {}
  std::map<std::string, int> forbidden;

  const char* name() const noexcept override { return inner_->name(); }
  int device_count() noexcept override { return inner_->device_count(); }
  fragless::backend::status get_memory_info(int d, fragless::backend::memory_info* info) noexcept override {
    return inner_->get_memory_info(d, info);
  }
  fragless::backend::status stream_device(fragless::backend::stream_handle s, int f, int* d) noexcept override {
    return inner_->stream_device(s, f, d);
  }
  fragless::backend::status synchronize_device(int d) noexcept override {
    ++forbidden["synchronize_device"];
    return inner_->synchronize_device(d);
  }
  std::string last_error_text() noexcept override { return inner_->last_error_text(); }
  fragless::backend::status malloc_segment(int d, std::size_t b, void** a) noexcept override { return inner_->malloc_segment(d, b, a); }
  fragless::backend::status free_segment(int d, void* a) noexcept override {
    ++forbidden["free_segment"];
    return inner_->free_segment(d, a);
  }
  bool supports_vmm(int d) noexcept override { return inner_->supports_vmm(d); }
  std::size_t vmm_granularity_bytes(int d) noexcept override { return inner_->vmm_granularity_bytes(d); }
  fragless::backend::status reserve_address_range(int d, std::size_t b, std::uintptr_t* base) noexcept override {
    return inner_->reserve_address_range(d, b, base);
  }
  fragless::backend::status free_address_range(int d, std::uintptr_t base, std::size_t b) noexcept override {
    ++forbidden["free_address_range"];
    return inner_->free_address_range(d, base, b);
  }
  fragless::backend::status create_physical(int d, std::size_t b, fragless::backend::physical_handle* h) noexcept override {
    return inner_->create_physical(d, b, h);
  }
  fragless::backend::status release_physical(int d, fragless::backend::physical_handle h) noexcept override {
    ++forbidden["release_physical"];
    return inner_->release_physical(d, h);
  }
  fragless::backend::status map(int d, std::uintptr_t a, std::size_t b, fragless::backend::physical_handle h) noexcept override {
    return inner_->map(d, a, b, h);
  }
  fragless::backend::status unmap(int d, std::uintptr_t a, std::size_t b) noexcept override {
    ++forbidden["unmap"];
    return inner_->unmap(d, a, b);
  }
  fragless::backend::status create_event(int d, fragless::backend::event_handle* e) noexcept override { return inner_->create_event(d, e); }
  fragless::backend::status destroy_event(int d, fragless::backend::event_handle e) noexcept override { return inner_->destroy_event(d, e); }
  fragless::backend::status record_event(int d, fragless::backend::event_handle e, fragless::backend::stream_handle s) noexcept override {
    return inner_->record_event(d, e, s);
  }
  fragless::backend::status query_event(int d, fragless::backend::event_handle e) noexcept override {
    ++forbidden["query_event"];
    return inner_->query_event(d, e);
  }
  fragless::backend::status stream_wait_event(int d, fragless::backend::stream_handle s, fragless::backend::event_handle e) noexcept override {
    ++forbidden["stream_wait_event"];  // allowed by CUDA, but not onto work outside a capture
    return inner_->stream_wait_event(d, s, e);
  }

 private:
  std::unique_ptr<fake_backend> inner_;
};

void* stream_number(std::uintptr_t n) { return reinterpret_cast<void*>(n); }

}  // namespace

TEST_CASE("while a capture is underway the device sees no query, synchronization, release or wait", "[capture]") {
  const bool vmm = GENERATE(true, false);
  INFO((vmm ? "vmm" : "cudaMalloc"));
  auto* fake = new fake_backend(512 * kMiB, vmm);
  auto* counting = new counting_backend(fake);
  core::cache_settings settings;
  settings.conf.backend = vmm ? fragless::backend_kind::vmm : fragless::backend_kind::cuda_malloc;
  settings.conf.compact_threshold_bytes = 0;   // automatic passes at every chance
  settings.compaction_interval_ns = 0;
  settings.conf.release_threshold_bytes = 0;   // release after every free
  core::allocator instance(backend::make_capture_aware(std::unique_ptr<backend::backend>(counting)), settings);
  core::device_cache& cache = instance.device(0);
  // Some cached memory and some pending frees from before the capture.
  std::vector<void*> before;
  for (std::size_t bytes : {3 * kMiB, 40 * kMiB, 4096ul, 100 * kMiB}) before.push_back(instance.allocate(bytes, 0, nullptr));
  instance.deallocate(before[1]);

  backend::enter_capture();
  counting->forbidden.clear();
  std::vector<void*> live;
  // The best fit for this request is memory stream 5 freed before the capture: reusing it
  // would need a wait of stream 1 on stream 5.
  void* foreign_hole = instance.allocate(40 * kMiB, 0, stream_number(5));
  backend::leave_capture();
  fake->events_complete = false;  // stream 5 is still busy: its free keeps its stream
  instance.deallocate(foreign_hole);
  backend::enter_capture();
  counting->forbidden.clear();
  live.push_back(instance.allocate(30 * kMiB, 0, stream_number(1)));
  std::mt19937_64 random(3);
  for (int step = 0; step < 400; ++step) {
    const auto choice = random() % 10;
    if (choice < 5 || live.empty()) {
      const std::size_t bytes = random() % 2 ? 512 + random() % 65536 : kMiB + random() % (24 * kMiB);
      try {
        live.push_back(instance.allocate(bytes, 0, stream_number(1 + random() % 2)));
      } catch (const out_of_memory_error&) {
        // allowed: nothing can be released during the capture
      }
    } else if (choice < 8) {
      const std::size_t at = random() % live.size();
      instance.record_stream(live[at], stream_number(3));
      instance.deallocate(live[at]);
      live.erase(live.begin() + static_cast<long>(at));
    } else if (choice == 8) {
      cache.release_cache(0);
    } else {
      cache.compact();
    }
  }
  // An out-of-memory during the capture fails without releasing anything.
  CHECK_THROWS_AS(instance.allocate(600 * kMiB, 0, nullptr), out_of_memory_error);
  std::string seen;
  for (const auto& [call, count] : counting->forbidden) seen += call + " x" + std::to_string(count) + " ";
  INFO("forbidden calls: " << seen);
  CHECK(counting->forbidden.empty());
  backend::leave_capture();
  fake->events_complete = true;

  // After the capture: held-back frees complete and memory goes back.
  for (void* block : live) instance.deallocate(block);
  for (std::size_t i = 0; i < before.size(); ++i)
    if (i != 1) instance.deallocate(before[i]);
  cache.release_cache(0);
  CHECK(counting->forbidden["synchronize_device"] > 0);
  const device_stats stats = cache.stats();
  CHECK(stats.active[pool_all].current == 0);
  CHECK(stats.reserved_bytes[pool_all].current == 0);
  CHECK(fake->used_bytes() == 0);
  fragless::testing::check_consistency(cache.snapshot(), stats);
}
