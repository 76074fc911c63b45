// tensor_timeline: see header.
#include "tensor_timeline.hpp"

#include <stdexcept>

namespace fragless::bench {

std::uint64_t tensor_timeline::bytes(std::uint64_t size_bytes, std::uint32_t stream) {
  if (size_bytes == 0) size_bytes = 1;
  const std::uint64_t id = next_id_++;
  trace_.events.push_back(traces::trace_event{traces::trace_op::alloc, stream, id, size_bytes});
  live_.emplace_back(id, live{size_bytes, stream});
  return id;
}

std::uint64_t tensor_timeline::tensor(std::uint64_t element_bytes, std::initializer_list<std::uint64_t> shape,
                                      std::uint32_t stream) {
  std::uint64_t size = element_bytes;
  for (std::uint64_t dimension : shape) size *= dimension;
  return bytes(size, stream);
}

void tensor_timeline::free(std::uint64_t id) {
  for (std::size_t i = live_.size(); i-- > 0;) {
    if (live_[i].first == id) {
      trace_.events.push_back(traces::trace_event{traces::trace_op::free, live_[i].second.stream, id,
                                                  live_[i].second.size_bytes});
      live_.erase(live_.begin() + static_cast<std::ptrdiff_t>(i));
      return;
    }
  }
  throw std::logic_error("workload generator freed an unknown tensor");
}

bool tensor_timeline::is_live(std::uint64_t id) const {
  for (std::size_t i = live_.size(); i-- > 0;) {
    if (live_[i].first == id) return true;
  }
  return false;
}

void tensor_timeline::scratch(std::uint64_t element_bytes, std::initializer_list<std::uint64_t> shape,
                              std::uint32_t stream) {
  free(tensor(element_bytes, shape, stream));
}

std::uint64_t workload_random::next() {
  std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::uint64_t workload_random::between(std::uint64_t low, std::uint64_t high) {
  return low + next() % (high - low + 1);
}

std::uint64_t workload_random::log_uniform(std::uint64_t low, std::uint64_t high) {
  if (low == 0) low = 1;
  if (high <= low) return low;
  // Exponents in 1/256ths of a power of two: x = 256 * log2(value), approximately.
  auto to_exponent = [](std::uint64_t value) {
    const unsigned whole = 63u - static_cast<unsigned>(__builtin_clzll(value));
    const std::uint64_t base = std::uint64_t{1} << whole;
    const std::uint64_t fraction = whole >= 8 ? (value - base) >> (whole - 8) : ((value - base) << (8 - whole));
    return std::uint64_t{whole} * 256 + fraction;
  };
  const std::uint64_t x = between(to_exponent(low), to_exponent(high));
  const unsigned whole = static_cast<unsigned>(x / 256);
  const std::uint64_t fraction = x % 256;
  const std::uint64_t base = std::uint64_t{1} << whole;
  const std::uint64_t value = whole >= 8 ? base + (fraction << (whole - 8)) : base + ((fraction * base) >> 8);
  return value < low ? low : (value > high ? high : value);
}

}  // namespace fragless::bench
