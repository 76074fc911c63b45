// live_block_checker: interval-set overlap detection (see header).
#include "live_block_checker.hpp"
#include "traces/text_fields.hpp"

namespace fragless::bench {

bool live_block_checker::insert(std::uint64_t address, std::uint64_t size_bytes, std::string* conflict) {
  const std::uint64_t end = address + size_bytes;
  if (size_bytes == 0 || end < address) {
    if (conflict != nullptr) *conflict = "block at " + traces::format_hex(address) + " has an impossible size";
    return false;
  }
  auto next = intervals_.lower_bound(address);  // first block starting at or after address
  if (next != intervals_.end() && next->first < end) {
    if (conflict != nullptr) {
      *conflict = "block [" + traces::format_hex(address) + ", " + traces::format_hex(end) + ") overlaps live block [" + traces::format_hex(next->first) + ", " +
                  traces::format_hex(next->second) + ")";
    }
    return false;
  }
  if (next != intervals_.begin()) {
    auto previous = std::prev(next);
    if (previous->second > address) {
      if (conflict != nullptr) {
        *conflict = "block [" + traces::format_hex(address) + ", " + traces::format_hex(end) + ") overlaps live block [" + traces::format_hex(previous->first) +
                    ", " + traces::format_hex(previous->second) + ")";
      }
      return false;
    }
  }
  intervals_.emplace_hint(next, address, end);
  return true;
}

bool live_block_checker::erase(std::uint64_t address) {
  return intervals_.erase(address) == 1;
}

}  // namespace fragless::bench
