// live_block_checker: proves during a replay that no two live blocks overlap.
// Invariant: `intervals_` holds the live blocks as disjoint [start, end) ranges keyed by
// start; insert refuses (and reports) a range that intersects any of them.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace fragless::bench {

class live_block_checker {
public:
  // Returns false (and fills `conflict`) when [address, address + size_bytes) overlaps a
  // live block, or when size_bytes wraps the address space.
  bool insert(std::uint64_t address, std::uint64_t size_bytes, std::string* conflict = nullptr);
  // Returns false when no live block starts at `address`.
  bool erase(std::uint64_t address);
  std::size_t live_count() const { return intervals_.size(); }
  void clear() { intervals_.clear(); }

private:
  std::map<std::uint64_t, std::uint64_t> intervals_;  // start -> end (exclusive)
};

}  // namespace fragless::bench
