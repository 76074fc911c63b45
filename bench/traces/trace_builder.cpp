// trace_builder: address -> block id bookkeeping for the readers (see header).
#include "trace_builder.hpp"
#include "text_fields.hpp"

namespace fragless::traces {

std::uint32_t trace_builder::stream_index(std::uint64_t raw_stream) {
  auto [it, inserted] = streams_.emplace(raw_stream, static_cast<std::uint32_t>(streams_.size()));
  if (inserted) trace_.stream_count = static_cast<std::uint32_t>(streams_.size());
  return it->second;
}

void trace_builder::add_alloc(std::uint64_t address, std::uint64_t size_bytes,
                              std::uint64_t raw_stream, const std::string& where) {
  if (size_bytes == 0 || size_bytes > max_block_bytes) {
    throw trace_error(where + ": absurd allocation size " + std::to_string(size_bytes));
  }
  if (live_.count(address) != 0) {
    throw trace_error(where + ": allocation at " + format_hex(address) + " which is already live");
  }
  const std::uint32_t stream = stream_index(raw_stream);
  const std::uint64_t id = next_block_id_++;
  live_.emplace(address, live_block{id, size_bytes, stream});
  live_bytes_ += size_bytes;
  trace_.events.push_back(trace_event{trace_op::alloc, stream, id, size_bytes});
}

void trace_builder::seed(std::uint64_t address, std::uint64_t size_bytes, std::uint64_t raw_stream,
                         const std::string& where) {
  if (trace_.events.size() != trace_.seeded_block_count) {
    throw trace_error(where + ": seed after the trace began");
  }
  add_alloc(address, size_bytes, raw_stream, where);
  trace_.seeded_block_count = trace_.events.size();
}

void trace_builder::alloc(std::uint64_t address, std::uint64_t size_bytes, std::uint64_t raw_stream,
                          const std::string& where) {
  add_alloc(address, size_bytes, raw_stream, where);
}

void trace_builder::free(std::uint64_t address, const std::string& where) {
  auto found = live_.find(address);
  if (found == live_.end()) {
    throw trace_error(where + ": free of unknown address " + format_hex(address));
  }
  const live_block block = found->second;
  live_.erase(found);
  live_bytes_ -= block.size_bytes;
  trace_.events.push_back(trace_event{trace_op::free, block.stream_index, block.block_id, block.size_bytes});
}

}  // namespace fragless::traces
