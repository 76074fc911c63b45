// A small set of streams: the streams whose queued work may still touch a free range
// (see Note [Stream reuse] in device_cache_free.cpp). Invariant: sorted, no duplicates.
// Up to kInline streams live inside the object (the common case: one stream), so copying
// free ranges around the large pool allocates no host memory.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <span>
#include <vector>

namespace fragless::core {

using stream_id = void*;  // the cudaStream_t value; nullptr is the legacy default stream

class stream_set {
 public:
  stream_set() = default;
  explicit stream_set(stream_id stream) : inline_{stream}, size_(1) {}

  bool empty() const noexcept { return size_ == 0; }
  std::size_t size() const noexcept { return size_; }
  std::span<const stream_id> streams() const noexcept {
    return size_ <= kInline ? std::span<const stream_id>(inline_.data(), size_)
                            : std::span<const stream_id>(overflow_.data(), overflow_.size());
  }
  bool contains(stream_id stream) const noexcept {
    const auto all = streams();
    return std::binary_search(all.begin(), all.end(), stream);
  }
  // True when work on streams other than `stream` may still touch the range.
  bool foreign_to(stream_id stream) const noexcept {
    return !(size_ == 0 || (size_ == 1 && inline_[0] == stream));
  }
  void insert(stream_id stream) {
    if (contains(stream)) return;
    if (size_ < kInline) {
      auto at = std::lower_bound(inline_.begin(), inline_.begin() + size_, stream);
      std::move_backward(at, inline_.begin() + size_, inline_.begin() + size_ + 1);
      *at = stream;
      ++size_;
      return;
    }
    if (size_ == kInline) overflow_.assign(inline_.begin(), inline_.end());
    overflow_.insert(std::lower_bound(overflow_.begin(), overflow_.end(), stream), stream);
    size_ = overflow_.size();
  }
  // Replaces `from` by `to` (Note [Retired streams]); true when `from` was in the set.
  bool rename(stream_id from, stream_id to) {
    if (!contains(from)) return false;
    std::vector<stream_id> all(streams().begin(), streams().end());
    clear();
    for (stream_id stream : all) insert(stream == from ? to : stream);
    return true;
  }
  void merge(const stream_set& other) {
    for (stream_id stream : other.streams()) insert(stream);
  }
  void clear() noexcept {
    size_ = 0;
    overflow_.clear();
  }
  bool operator==(const stream_set& other) const noexcept {
    const auto a = streams();
    const auto b = other.streams();
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  static constexpr std::size_t kInline = 2;
  std::array<stream_id, kInline> inline_{};
  std::size_t size_ = 0;
  std::vector<stream_id> overflow_;  // all streams, when more than kInline
};

}  // namespace fragless::core
