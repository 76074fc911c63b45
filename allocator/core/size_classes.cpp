// Size-class table of Note [Size classes]; computed once, checked by unit tests.
#include "core/size_classes.hpp"

#include <algorithm>
#include <bit>

namespace fragless::core {
namespace {

constexpr std::array<std::size_t, kClassCount> make_class_table() {
  std::array<std::size_t, kClassCount> table{};
  std::size_t index = 0;
  for (std::size_t size = kBlockAlignment; size <= 4096; size += kBlockAlignment) table[index++] = size;
  for (std::size_t power = 4096; power < kSmallLimitBytes; power *= 2)
    for (std::size_t step = 1; step <= 8; ++step) table[index++] = power + step * (power / 8);
  return table;
}

constexpr std::array<std::size_t, kClassCount> kClassTable = make_class_table();
static_assert(kClassTable[kClassCount - 1] == kSmallLimitBytes);

}  // namespace

std::size_t class_of(std::size_t request_bytes) noexcept {
  const std::size_t rounded = rounded_request_bytes(request_bytes);
  if (rounded <= 4096) return rounded / kBlockAlignment - 1;
  // rounded in (2^k, 2^(k+1)]: k = bit_width(rounded - 1) - 1.
  const std::size_t k = static_cast<std::size_t>(std::bit_width(rounded - 1)) - 1;
  const std::size_t power = std::size_t{1} << k;
  const std::size_t step = power / 8;
  const std::size_t within = (rounded - power + step - 1) / step;  // 1..8
  return 8 + (k - 12) * 8 + (within - 1);
}

std::size_t class_size_bytes(std::size_t class_index) noexcept { return kClassTable[class_index]; }

std::size_t full_slab_bytes(std::size_t class_index) noexcept {
  const std::size_t size = kClassTable[class_index];
  std::size_t objects = (64 * 1024 + size - 1) / size;
  if (objects < 8) objects = 8;
  return objects * size;
}

// Note [Slab growth]
std::size_t slab_bytes(std::size_t class_index, std::size_t slabs_of_class) noexcept {
  const std::size_t size = kClassTable[class_index];
  const std::size_t full_objects = full_slab_bytes(class_index) / size;
  std::size_t objects = (8 * 1024 + size - 1) / size;
  for (std::size_t doubling = 0; doubling < slabs_of_class && objects < full_objects; ++doubling) objects *= 2;
  return std::min(objects, full_objects) * size;
}

}  // namespace fragless::core
