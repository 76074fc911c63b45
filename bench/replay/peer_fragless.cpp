// peer_fragless: libfragless through its public C++ API (allocate / deallocate /
// get_device_counters / empty_cache).
// Invariant: fragless exceptions never escape (an out-of-memory becomes nullptr).
#include "peer_fragless.hpp"

#include <fragless/fragless.hpp>

#include <exception>

namespace fragless::bench {

namespace {

class fragless_peer final : public replay_allocator {
public:
  void* allocate(std::uint64_t size_bytes, stream_handle stream) noexcept override {
    try {
      return fragless::allocate(static_cast<std::size_t>(size_bytes), 0, stream);
    } catch (const std::exception& e) {
      last_failure_ = e.what();
      return nullptr;
    }
  }
  void deallocate(void* pointer, std::uint64_t, stream_handle) noexcept override {
    try {
      fragless::deallocate(pointer);
    } catch (const std::exception&) {
    }
  }
  // The replayer asks after every event of the measured pass: the running counters, not
  // get_device_stats, whose layout figures walk a whole snapshot (that walk was most of a
  // corpus run's time).
  std::uint64_t reserved_bytes() noexcept override {
    try {
      return static_cast<std::uint64_t>(fragless::get_device_counters(0).reserved_bytes[fragless::pool_all].current);
    } catch (const std::exception&) {
      return 0;
    }
  }
  void release_cached() noexcept override {
    try {
      fragless::empty_cache(0);
    } catch (const std::exception&) {
    }
  }
  std::string last_failure() const override { return last_failure_; }

private:
  std::string last_failure_;
};

}  // namespace

std::unique_ptr<replay_allocator> make_fragless_peer(const std::string&, std::string& why_not) {
  try {
    // A first call initialises the device (and reads FRAGLESS_CONF); report failure here.
    (void)fragless::backend_name(0);
    return std::make_unique<fragless_peer>();
  } catch (const std::exception& e) {
    why_not = std::string("libfragless failed to start: ") + e.what();
    return nullptr;
  }
}

}  // namespace fragless::bench
