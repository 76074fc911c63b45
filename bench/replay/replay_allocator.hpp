// replay_allocator: the small interface every allocator peer implements so the replayer
// can drive it. One file per peer (peer_*.cpp); only peer files talk to CUDA or torch.
// Invariant: allocate/deallocate/release_cached never throw; allocate returns nullptr when
// the allocator is out of memory. Streams are opaque handles (cudaStream_t values).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace fragless::bench {

using stream_handle = void*;

class replay_allocator {
public:
  virtual ~replay_allocator() = default;
  // Hot path: one request. nullptr = out of memory.
  virtual void* allocate(std::uint64_t size_bytes, stream_handle stream) noexcept = 0;
  // Hot path: returns a block allocated on `stream` with `size_bytes`.
  virtual void deallocate(void* pointer, std::uint64_t size_bytes, stream_handle stream) noexcept = 0;
  // Device bytes the allocator holds right now (its own account).
  virtual std::uint64_t reserved_bytes() noexcept = 0;
  // Returns cached memory to the device (between repetitions).
  virtual void release_cached() noexcept = 0;
  // Why the last allocate returned nullptr (the allocator's own message), if known.
  virtual std::string last_failure() const { return {}; }
};

// Why a peer could not be created, or the peer.
struct peer_creation {
  std::unique_ptr<replay_allocator> allocator;
  std::string unavailable_reason;  // non-empty when allocator is null
};

// Peer names: "fragless", "fragless[NAME]" (named configuration, spec in `configuration`),
// "pytorch", "pytorch-expandable", "cudamalloc". Must be called in a fresh process for the
// pytorch peers (settings are read at their first use).
peer_creation create_peer(const std::string& name, const std::string& configuration);

// The replayed peers, in report order (without named fragless configurations).
std::vector<std::string> default_peer_names();

// Whether each peer was compiled in (for --help and rows saying "not built").
bool peer_is_built(const std::string& name);

}  // namespace fragless::bench
