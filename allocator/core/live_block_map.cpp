// Address -> live block lookup (see live_block_map.hpp).
#include "core/live_block_map.hpp"

namespace fragless::core {

std::optional<std::uintptr_t> live_block_map::containing(std::uintptr_t address) const {
  std::optional<std::uintptr_t> found;
  for_each([&](std::uintptr_t start, const live_block& block) {
    if (start <= address && address < start + block.size_bytes) found = start;
  });
  return found;
}

}  // namespace fragless::core
