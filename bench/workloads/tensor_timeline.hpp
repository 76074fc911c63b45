// tensor_timeline: what the generators use to write allocation lifetimes as a framework
// would: tensors of a dtype and shape allocated and freed on a stream, a small,
// deterministic random source (identical on every platform), and write_workload, the
// preamble and ending every generator shares (the trace, its timeline and its random source).
// Invariant: the produced trace satisfies validate_trace (ids are fresh per tensor), and
// every draw of workload_random is a pure function of the seed (integer arithmetic only).
#pragma once

#include "traces/trace.hpp"

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace fragless::bench {

// Element sizes, in bytes, shared by the generators.
inline constexpr std::uint64_t fp32 = 4, bf16 = 2, int64_bytes = 8;
inline constexpr std::uint64_t kib = std::uint64_t{1} << 10, mib = std::uint64_t{1} << 20;
inline constexpr std::uint64_t vocabulary = 32000;  // token vocabulary of the language models

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
  bool is_live(std::uint64_t id) const;
  std::size_t live_count() const { return live_.size(); }

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
  // Log-uniform in [low, high]: a uniform exponent, with the mantissa linear between powers
  // of two (integer arithmetic only, so the same on every platform). low >= 1.
  std::uint64_t log_uniform(std::uint64_t low, std::uint64_t high);
  // True with probability percent / 100.
  bool chance(std::uint64_t percent) { return between(1, 100) <= percent; }

private:
  std::uint64_t state_;
};

// The preamble and the ending every generator shares: an empty built-in trace named `name`
// with `streams` streams, a timeline writing into it and the random source of `seed` are
// handed to `write(timeline, random)`, and the trace it wrote is returned.
template <typename Write>
traces::trace write_workload(const std::string& name, std::uint32_t streams, std::uint64_t seed, Write&& write) {
  traces::trace trace;
  trace.name = name;
  trace.source_format = "builtin";
  tensor_timeline timeline(trace, streams);
  workload_random random(seed);
  write(timeline, random);
  return trace;
}

}  // namespace fragless::bench
