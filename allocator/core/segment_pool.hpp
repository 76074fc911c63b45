// The large pool in cudaMalloc mode: PyTorch-like segments (Note [Segment sizes]) under
// the max split size rule (Note [Max split size]); used where VMM is unavailable or
// turned off (see core/large_pool.hpp for the interface).
// Invariant: a block lies inside one live segment; the free index holds exactly the
// segments' bytes no block uses; only whole free segments are released, and reserved
// bytes = the segments' bytes; whole_free_bytes_ = the bytes of the segments that one free
// range covers whole (Note [Whole free segments]).
// Not thread-safe: the device cache holds the device lock around every call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "core/large_pool.hpp"

namespace fragless::core {

class segment_pool final : public large_pool {
 public:
  segment_pool(backend::backend& device_backend, int device, event_pool& events, const cache_settings& settings)
      : large_pool(device_backend, device, events, settings) {}
  ~segment_pool() override;

  bool uses_vmm() const noexcept override { return false; }
  backend::status allocate(std::size_t size_bytes, stream_id stream, std::uintptr_t* address,
                           std::size_t* placed_bytes = nullptr) noexcept override;
  bool release(std::uintptr_t address, std::size_t size_bytes, const stream_set& streams) noexcept override;
  // Releases whole free segments (idle ones unless pass.synchronized) while more than
  // pass.bytes_to_keep cached bytes are left; no page compaction in this mode.
  compaction_outcome compact(const compaction_pass& pass) noexcept override;
  std::size_t reserved_bytes() const noexcept override { return segment_bytes_; }
  std::size_t device_segment_count() const noexcept override { return segments_.size(); }
  // Note [Whole free segments]
  std::size_t cached_free_bytes() const noexcept override { return whole_free_bytes_; }
  std::size_t largest_free_reserved_bytes() const noexcept override { return index_.largest_bytes(); }
  std::vector<reserved_region> reserved_regions() const override;
  std::vector<shared_piece> shared_pieces(std::uintptr_t address, std::size_t bytes) const override;

 private:
  // Note [Segment sizes]
  std::size_t segment_size_for(std::size_t size_bytes) const noexcept;
  // Note [Max split size]: best fit, or none when the rule forbids the best fitting range.
  std::optional<free_range> segment_fit(std::size_t size_bytes) const;
  backend::status allocate_segment(std::size_t size_bytes, stream_id stream, std::uintptr_t* address,
                                   std::size_t* placed_bytes);

  // Whether `range` covers its segment whole (Note [Whole free segments]).
  bool covers_segment(std::uintptr_t address, std::size_t size_bytes, std::uintptr_t segment_id) const noexcept;
  std::map<std::uintptr_t, std::size_t> segments_;  // base -> size
  std::size_t segment_bytes_ = 0;
  std::size_t whole_free_bytes_ = 0;
};

}  // namespace fragless::core
