// trace_builder: what every reader uses to turn (address, size, stream) records into a
// trace. It assigns a fresh block id per allocation, maps raw stream handles to dense
// indices, and refuses a free of an unknown address or a second allocation at a live
// address, with the caller's position text in the error.
// Invariant: the trace it fills always satisfies validate_trace.
#pragma once

#include "trace.hpp"

#include <string>
#include <unordered_map>

namespace fragless::traces {

class trace_builder {
public:
  explicit trace_builder(trace& target) : trace_(target) {}

  // Dense index for a raw stream handle (first seen = 0).
  std::uint32_t stream_index(std::uint64_t raw_stream);

  // A block live before the trace began; must precede every alloc/free.
  void seed(std::uint64_t address, std::uint64_t size_bytes, std::uint64_t raw_stream,
            const std::string& where);
  void alloc(std::uint64_t address, std::uint64_t size_bytes, std::uint64_t raw_stream,
             const std::string& where);
  // Frees on the stream the block was allocated on.
  void free(std::uint64_t address, const std::string& where);

  bool is_live(std::uint64_t address) const { return live_.count(address) != 0; }
  std::uint64_t live_bytes() const { return live_bytes_; }

private:
  struct live_block {
    std::uint64_t block_id;
    std::uint64_t size_bytes;
    std::uint32_t stream_index;
  };
  void add_alloc(std::uint64_t address, std::uint64_t size_bytes, std::uint64_t raw_stream,
                 const std::string& where);

  trace& trace_;
  std::unordered_map<std::uint64_t, std::uint32_t> streams_;
  std::unordered_map<std::uint64_t, live_block> live_;
  std::uint64_t next_block_id_ = 0;
  std::uint64_t live_bytes_ = 0;
};

}  // namespace fragless::traces
