// cuda_streams: the replay's streams. Trace stream 0 maps to the default stream, every
// other trace stream to a stream of its own (created non-blocking).
// Invariant: the only place outside peer files where the benchmark calls CUDA.
#pragma once
#include "replay_allocator.hpp"
#include <cstdint>
#include <string>
#include <vector>
namespace fragless::bench {
// Throws std::runtime_error when a stream cannot be created.
std::vector<stream_handle> create_replay_streams(std::uint32_t count);
void destroy_replay_streams(const std::vector<stream_handle>& streams) noexcept;
}  // namespace fragless::bench
