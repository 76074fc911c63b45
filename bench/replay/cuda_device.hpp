// cuda_device: what the benchmark asks the CUDA runtime about the device itself (its name,
// its memory), for runs without simcuda's control API (Note [Counting device calls]).
// Invariant: part of the bench's CUDA boundary with cuda_streams.cpp and the peer files;
// never throws, and a failed query says so instead of inventing a figure.
#pragma once

#include <cstdint>
#include <string>

namespace fragless::bench {

struct device_facts {
  bool ok = false;
  std::string name;               // cudaGetDeviceProperties(0).name
  std::uint64_t total_bytes = 0;  // cudaMemGetInfo
  std::uint64_t free_bytes = 0;
  std::string error;              // why not ok
};

// Device 0 (the replays use device 0). Starts CUDA in the calling process.
device_facts query_device() noexcept;

// Device 0's memory in use, cudaMemGetInfo's total - free: the whole device's, other
// processes included. A device_used_bytes_reader (replay/device_counters.hpp).
bool read_device_used_bytes(std::uint64_t* used_bytes);

}  // namespace fragless::bench
