// A small set of streams: the streams whose queued work may still touch a free range
// (see Note [Stream reuse] in device_cache.hpp). Invariant: sorted, no duplicates.
#pragma once

#include <algorithm>
#include <vector>

namespace fragless::core {

using stream_id = void*;  // the cudaStream_t value; nullptr is the legacy default stream

class stream_set {
 public:
  stream_set() = default;
  explicit stream_set(stream_id stream) : streams_{stream} {}

  bool empty() const noexcept { return streams_.empty(); }
  std::size_t size() const noexcept { return streams_.size(); }
  const std::vector<stream_id>& streams() const noexcept { return streams_; }
  bool contains(stream_id stream) const noexcept {
    return std::binary_search(streams_.begin(), streams_.end(), stream);
  }
  // True when work on streams other than `stream` may still touch the range.
  bool foreign_to(stream_id stream) const noexcept {
    return !(streams_.empty() || (streams_.size() == 1 && streams_[0] == stream));
  }
  void insert(stream_id stream) {
    auto at = std::lower_bound(streams_.begin(), streams_.end(), stream);
    if (at == streams_.end() || *at != stream) streams_.insert(at, stream);
  }
  void merge(const stream_set& other) {
    for (stream_id stream : other.streams_) insert(stream);
  }
  void clear() noexcept { streams_.clear(); }
  bool operator==(const stream_set&) const = default;

 private:
  std::vector<stream_id> streams_;
};

}  // namespace fragless::core
