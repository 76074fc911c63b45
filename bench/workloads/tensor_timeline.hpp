// tensor_timeline: what the generators use to write allocation lifetimes as a framework
// would: tensors of a dtype and shape allocated and freed on a stream, plus a small,
// deterministic random source (identical on every platform).
// Invariant: the produced trace satisfies validate_trace (ids are fresh per tensor).
#pragma once

#include "traces/trace.hpp"

#include <cstdint>
#include <initializer_list>

namespace fragless::bench {

class tensor_timeline {
public:
  explicit tensor_timeline(traces::trace& target, std::uint32_t streams = 1) : trace_(target) {
    trace_.stream_count = streams;
  }
  // Allocates a tensor of `element_bytes` x product(shape); returns its id.
  std::uint64_t tensor(std::uint64_t element_bytes, std::initializer_list<std::uint64_t> shape, std::uint32_t stream = 0);
  std::uint64_t bytes(std::uint64_t size_bytes, std::uint32_t stream = 0);
  void free(std::uint64_t id);
  // A temporary: allocated and freed right away (an elementwise op's scratch output).
  void scratch(std::uint64_t element_bytes, std::initializer_list<std::uint64_t> shape, std::uint32_t stream = 0);

private:
  struct live {
    std::uint64_t size_bytes;
    std::uint32_t stream;
  };
  traces::trace& trace_;
  std::uint64_t next_id_ = 0;
  std::vector<std::pair<std::uint64_t, live>> live_;  // small: linear search from the back
};

// SplitMix64: tiny, fast, and defined bit for bit (unlike std:: distributions).
class workload_random {
public:
  explicit workload_random(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();
  // Uniform in [low, high] (inclusive).
  std::uint64_t between(std::uint64_t low, std::uint64_t high);

private:
  std::uint64_t state_;
};

}  // namespace fragless::bench
