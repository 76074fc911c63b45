// A CUDA-free backend for unit tests of the allocator's plain-C++ layers: device memory is
// only address arithmetic (nothing is dereferenced), events complete when the test says
// so, and any call can be made to fail. Invariant: used_bytes() == bytes of live
// segments + live physical handles, like simcuda_used_bytes. Mappings follow the driver's
// rules: a handle is mapped whole, at as many addresses as asked (one physical allocation,
// counted once), never over another mapping; an unmap covers whole mappings. Stricter than
// the driver on purpose: a handle still mapped somewhere is not released.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "backend/backend.hpp"

namespace fragless::testing {

namespace be = fragless::backend;

class fake_backend final : public be::backend {
 public:
  explicit fake_backend(std::uint64_t capacity_bytes, bool vmm = true) : capacity_(capacity_bytes), vmm_(vmm) {}
  // What the last fake destroyed still had (its owner, the allocator, tears down first).
  struct left_over {
    std::size_t mappings = 0, handles = 0;
    int events = 0;  // created and not destroyed
  };
  static left_over& last_left_over() {
    static left_over last;
    return last;
  }
  ~fake_backend() override { last_left_over() = left_over{mappings_.size(), handles_.size(), live_events}; }

  // The fake's own maps stand for the driver's bookkeeping, whose host memory is not the
  // program's operator new: a test that makes operator new fail spares allocations made
  // while this is true (tests/allocator/host_memory_test.cpp).
  static bool in_own_bookkeeping() noexcept { return own_bookkeeping_depth() > 0; }

  // ---- test controls ----
  bool events_complete = true;   // query_event answers ok (true) or not_ready
  std::string fail_next;         // name of the next call to fail ("create_physical", ...)
  int fail_skip = 0;             // calls of that name to let through first
  std::uint64_t used_bytes() const { return used_; }
  std::uint64_t mapped_bytes() const { return mapped_; }  // address space mapped (aliases too)
  // Handles mapped at more than one address now.
  std::size_t aliased_handles() const {
    std::size_t count = 0;
    for (const auto& [handle, addresses] : mapped_handles_) count += addresses > 1 ? 1 : 0;
    return count;
  }
  std::size_t mapping_count() const { return mappings_.size(); }
  int syncs = 0;
  int waits = 0;
  // Runs once, inside the next synchronize_device, after the synchronization: what another
  // thread does while the allocator's synchronizing thread holds its device lock.
  std::function<void()> on_next_synchronize;

  const char* name() const noexcept override { return "fake"; }
  int device_count() noexcept override { return 2; }
  be::status get_memory_info(int, be::memory_info* info) noexcept override {
    info->total_bytes = capacity_;
    info->free_bytes = capacity_ - used_;
    return be::status::ok;
  }
  be::status stream_device(be::stream_handle stream, int fallback, int* device) noexcept override {
    // Streams with the top bit set belong to device 1, other non-null streams to device 0.
    if (stream == nullptr) *device = fallback;
    else *device = (reinterpret_cast<std::uintptr_t>(stream) >> 63) ? 1 : 0;
    return be::status::ok;
  }
  be::status synchronize_device(int) noexcept override {
    if (should_fail("synchronize_device")) return be::status::error;
    ++syncs;
    if (on_next_synchronize) {
      const std::function<void()> hook = std::move(on_next_synchronize);
      on_next_synchronize = nullptr;
      hook();
    }
    return be::status::ok;
  }
  std::string last_error_text() noexcept override { return "fake failure"; }

  be::status malloc_segment(int, std::size_t bytes, void** address) noexcept override {
    if (should_fail("malloc_segment")) return be::status::error;
    if (used_ + bytes > capacity_) return be::status::out_of_memory;
    used_ += bytes;
    next_address_ = (next_address_ + bytes + (1 << 21)) & ~std::uintptr_t{(1 << 21) - 1};
    *address = reinterpret_cast<void*>(next_address_);
    {
      const own_bookkeeping guard;
      segments_[next_address_] = bytes;
    }
    next_address_ += bytes;
    return be::status::ok;
  }
  be::status free_segment(int, void* address) noexcept override {
    auto at = segments_.find(reinterpret_cast<std::uintptr_t>(address));
    if (at == segments_.end()) return be::status::error;
    used_ -= at->second;
    segments_.erase(at);
    return be::status::ok;
  }
  bool supports_vmm(int) noexcept override { return vmm_; }
  std::size_t vmm_granularity_bytes(int) noexcept override { return std::size_t{2} << 20; }
  be::status reserve_address_range(int, std::size_t bytes, std::uintptr_t* base) noexcept override {
    if (should_fail("reserve_address_range")) return be::status::error;
    // Each reservation gets a range of its own, 2 MiB aligned, the first at 2^44.
    *base = next_range_base_;
    next_range_base_ += (bytes + (std::uintptr_t{4} << 20)) & ~((std::uintptr_t{2} << 20) - 1);
    range_bytes_ = bytes;
    return be::status::ok;
  }
  be::status free_address_range(int, std::uintptr_t, std::size_t) noexcept override {
    return be::status::ok;
  }
  be::status create_physical(int, std::size_t bytes, be::physical_handle* handle) noexcept override {
    if (should_fail("create_physical")) return be::status::error;
    if (used_ + bytes > capacity_) return be::status::out_of_memory;
    used_ += bytes;
    *handle = next_handle_++;
    {
      const own_bookkeeping guard;
      handles_[*handle] = bytes;
    }
    return be::status::ok;
  }
  be::status release_physical(int, be::physical_handle handle) noexcept override {
    auto at = handles_.find(handle);
    if (at == handles_.end() || mapped_handles_.count(handle) != 0) return be::status::error;
    used_ -= at->second;
    handles_.erase(at);
    return be::status::ok;
  }
  be::status map(int, std::uintptr_t address, std::size_t bytes, be::physical_handle handle) noexcept override {
    if (should_fail("map")) return be::status::error;
    const auto physical = handles_.find(handle);
    if (physical == handles_.end() || physical->second != bytes || overlaps_mapping(address, bytes))
      return be::status::error;
    {
      const own_bookkeeping guard;
      ++mapped_handles_[handle];
      mappings_[address] = device_mapping{handle, bytes};
    }
    mapped_ += bytes;
    return be::status::ok;
  }
  be::status unmap(int, std::uintptr_t address, std::size_t bytes) noexcept override {
    if (should_fail("unmap")) return be::status::error;
    // Whole mappings side by side, exactly covering the range.
    std::uintptr_t at = address;
    while (at < address + bytes) {
      auto found = mappings_.find(at);
      if (found == mappings_.end()) return be::status::error;
      at += found->second.bytes;
    }
    if (at != address + bytes) return be::status::error;
    for (at = address; at < address + bytes;) {
      auto found = mappings_.find(at);
      at += found->second.bytes;
      if (--mapped_handles_[found->second.handle] == 0) mapped_handles_.erase(found->second.handle);
      mapped_ -= found->second.bytes;
      mappings_.erase(found);
    }
    return be::status::ok;
  }
  // Is [address, address + bytes) entirely mapped?
  bool is_mapped(std::uintptr_t address, std::size_t bytes) const {
    const std::uintptr_t page = std::uintptr_t{2} << 20;
    for (std::uintptr_t at = address & ~(page - 1); at < address + bytes; at += page) {
      auto mapping = mappings_.upper_bound(at);  // a mapping may span many pages
      if (mapping == mappings_.begin()) return false;
      --mapping;
      if (at >= mapping->first + mapping->second.bytes) return false;
    }
    return true;
  }

  be::status create_event(int, be::event_handle* event) noexcept override {
    if (should_fail("create_event")) return be::status::error;
    *event = reinterpret_cast<void*>(next_event_++);
    ++live_events;
    return be::status::ok;
  }
  be::status destroy_event(int, be::event_handle) noexcept override {
    --live_events;
    return be::status::ok;
  }
  be::status record_event(int, be::event_handle, be::stream_handle) noexcept override {
    if (should_fail("record_event")) return be::status::error;
    return be::status::ok;
  }
  be::status query_event(int, be::event_handle) noexcept override {
    return events_complete ? be::status::ok : be::status::not_ready;
  }
  be::status stream_wait_event(int, be::stream_handle, be::event_handle) noexcept override {
    if (should_fail("stream_wait_event")) return be::status::error;
    ++waits;
    return be::status::ok;
  }
  int live_events = 0;

 private:
  bool overlaps_mapping(std::uintptr_t address, std::size_t bytes) const {
    auto after = mappings_.lower_bound(address);
    if (after != mappings_.end() && after->first < address + bytes) return true;
    if (after == mappings_.begin()) return false;
    --after;
    return after->first + after->second.bytes > address;
  }
  static int& own_bookkeeping_depth() noexcept {
    static thread_local int depth = 0;
    return depth;
  }
  struct own_bookkeeping {
    own_bookkeeping() noexcept { ++own_bookkeeping_depth(); }
    ~own_bookkeeping() { --own_bookkeeping_depth(); }
    own_bookkeeping(const own_bookkeeping&) = delete;
    own_bookkeeping& operator=(const own_bookkeeping&) = delete;
  };
  bool should_fail(const char* call) noexcept {
    if (fail_next != call) return false;
    if (fail_skip > 0) {
      --fail_skip;
      return false;
    }
    fail_next.clear();
    return true;
  }
  std::uint64_t capacity_;
  bool vmm_;
  std::uint64_t used_ = 0;
  std::uint64_t mapped_ = 0;
  std::size_t range_bytes_ = 0;
  std::uintptr_t next_address_ = std::uintptr_t{1} << 40;
  std::uintptr_t next_range_base_ = std::uintptr_t{1} << 44;
  be::physical_handle next_handle_ = 1;
  std::uintptr_t next_event_ = 0x1000;
  std::map<std::uintptr_t, std::size_t> segments_;
  std::map<be::physical_handle, std::size_t> handles_;
  std::map<be::physical_handle, int> mapped_handles_;  // handle -> addresses mapping it
  struct device_mapping {
    be::physical_handle handle;
    std::size_t bytes;
  };
  std::map<std::uintptr_t, device_mapping> mappings_;
};

}  // namespace fragless::testing
