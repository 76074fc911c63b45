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

}  // namespace fragless::bench
