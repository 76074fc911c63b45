// A small set of streams: the streams whose queued work may still touch a free range
// (see Note [Stream reuse] in device_cache_free.cpp), each with the order tick of its
// latest free into the range (Note [Standing waits], event_pool.hpp); the event pool also
// keeps a stream's standing waits in one, each source with the tick waited up to.
// Invariant: sorted by stream, no duplicates; a stream's tick is the largest it was given.
// Up to kInline streams live inside the object (the common case: one stream), so copying
// free ranges around the large pool allocates no host memory.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace fragless::core {

using stream_id = void*;  // the cudaStream_t value; nullptr is the legacy default stream

class stream_set {
 public:
  // The tick of a free whose time is not known: no standing wait covers it.
  static constexpr std::uint64_t kUnknownTick = std::numeric_limits<std::uint64_t>::max();

  stream_set() = default;
  explicit stream_set(stream_id stream, std::uint64_t freed_at_tick = kUnknownTick)
      : inline_{stream}, inline_ticks_{freed_at_tick}, size_(1) {}

  bool empty() const noexcept { return size_ == 0; }
  std::size_t size() const noexcept { return size_; }
  std::span<const stream_id> streams() const noexcept {
    return size_ <= kInline ? std::span<const stream_id>(inline_.data(), size_)
                            : std::span<const stream_id>(overflow_.data(), overflow_.size());
  }
  // The tick of each stream's latest free, parallel to streams().
  std::span<const std::uint64_t> freed_at_ticks() const noexcept {
    return size_ <= kInline ? std::span<const std::uint64_t>(inline_ticks_.data(), size_)
                            : std::span<const std::uint64_t>(overflow_ticks_.data(), overflow_ticks_.size());
  }
  bool contains(stream_id stream) const noexcept {
    const auto all = streams();
    return std::binary_search(all.begin(), all.end(), stream);
  }
  // The tick of `stream`, or `absent` when it is not in the set.
  std::uint64_t tick_of(stream_id stream, std::uint64_t absent) const noexcept {
    const auto all = streams();
    const auto found = std::lower_bound(all.begin(), all.end(), stream);
    return found != all.end() && *found == stream ? freed_at_ticks()[static_cast<std::size_t>(found - all.begin())]
                                                  : absent;
  }
  // True when work on streams other than `stream` may still touch the range.
  bool foreign_to(stream_id stream) const noexcept {
    return !(size_ == 0 || (size_ == 1 && inline_[0] == stream));
  }
  // Adds `stream`; a stream already there keeps the later of the two ticks.
  void insert(stream_id stream, std::uint64_t freed_at_tick = kUnknownTick) {
    const auto all = streams();
    const auto at = static_cast<std::size_t>(std::lower_bound(all.begin(), all.end(), stream) - all.begin());
    if (at < size_ && all[at] == stream) {
      std::uint64_t& tick = ticks()[at];
      tick = std::max(tick, freed_at_tick);
      return;
    }
    const auto offset = static_cast<std::ptrdiff_t>(at);
    if (size_ < kInline) {
      std::move_backward(inline_.begin() + offset, inline_.begin() + size_, inline_.begin() + size_ + 1);
      std::move_backward(inline_ticks_.begin() + offset, inline_ticks_.begin() + size_, inline_ticks_.begin() + size_ + 1);
      inline_[at] = stream;
      inline_ticks_[at] = freed_at_tick;
      ++size_;
      return;
    }
    if (size_ == kInline) {
      overflow_.assign(inline_.begin(), inline_.end());
      overflow_ticks_.assign(inline_ticks_.begin(), inline_ticks_.end());
    }
    overflow_.reserve(size_ + 1);  // both grow or neither does
    overflow_ticks_.reserve(size_ + 1);
    overflow_.insert(overflow_.begin() + offset, stream);
    overflow_ticks_.insert(overflow_ticks_.begin() + offset, freed_at_tick);
    size_ = overflow_.size();
  }
  // Every stream's latest free is now at `freed_at_tick` (the set describes a free made now).
  void stamp(std::uint64_t freed_at_tick) noexcept {
    for (std::uint64_t& tick : ticks()) tick = freed_at_tick;
  }
  // Replaces `from` by `to` (Note [Retired streams]); true when `from` was in the set.
  bool rename(stream_id from, stream_id to) {
    if (!contains(from)) return false;
    std::vector<stream_id> all(streams().begin(), streams().end());
    std::vector<std::uint64_t> ticks(freed_at_ticks().begin(), freed_at_ticks().end());
    clear();
    for (std::size_t i = 0; i < all.size(); ++i) insert(all[i] == from ? to : all[i], ticks[i]);
    return true;
  }
  // Removes `stream` if it is there (Note [Retired streams]).
  void erase(stream_id stream) noexcept {
    const auto all = streams();
    const auto found = std::lower_bound(all.begin(), all.end(), stream);
    if (found == all.end() || *found != stream) return;
    const auto at = found - all.begin();
    if (size_ <= kInline) {
      std::move(inline_.begin() + at + 1, inline_.begin() + static_cast<std::ptrdiff_t>(size_), inline_.begin() + at);
      std::move(inline_ticks_.begin() + at + 1, inline_ticks_.begin() + static_cast<std::ptrdiff_t>(size_),
                inline_ticks_.begin() + at);
      --size_;
      return;
    }
    overflow_.erase(overflow_.begin() + at);
    overflow_ticks_.erase(overflow_ticks_.begin() + at);
    size_ = overflow_.size();
    if (size_ > kInline) return;
    std::copy(overflow_.begin(), overflow_.end(), inline_.begin());  // back inside the object
    std::copy(overflow_ticks_.begin(), overflow_ticks_.end(), inline_ticks_.begin());
    overflow_.clear();
    overflow_ticks_.clear();
  }
  // Adds every stream of `other` (each keeps the larger tick). A set that already names
  // every stream of `other` (a standing wait raised again, a range freed again by the same
  // streams) only takes the larger ticks, in one linear pass with no allocation.
  void merge(const stream_set& other) { merge_skipping(other, nullptr, false); }
  // The same without `skipped` (a waiter's own stream, Note [Transitive waits]).
  void merge_except(const stream_set& other, stream_id skipped) { merge_skipping(other, skipped, true); }
  void clear() noexcept {
    size_ = 0;
    overflow_.clear();
    overflow_ticks_.clear();
  }
  bool operator==(const stream_set& other) const noexcept {
    const auto a = streams();
    const auto b = other.streams();
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  static constexpr std::size_t kInline = 2;
  std::array<stream_id, kInline> inline_{};
  std::array<std::uint64_t, kInline> inline_ticks_{};
  std::size_t size_ = 0;
  std::vector<stream_id> overflow_;  // all streams, when more than kInline
  std::vector<std::uint64_t> overflow_ticks_;
  void merge_skipping(const stream_set& other, stream_id skipped, bool skipping) {
    const auto theirs = other.streams();
    const auto their_ticks = other.freed_at_ticks();
    const auto ours = streams();
    const auto our_ticks = ticks();
    // Raise the ticks of streams both sets name, and note whether any is new.
    bool any_new = false;
    for (std::size_t i = 0, j = 0; j < theirs.size(); ++j) {
      if (skipping && theirs[j] == skipped) continue;
      while (i < ours.size() && ours[i] < theirs[j]) ++i;
      if (i < ours.size() && ours[i] == theirs[j]) {
        our_ticks[i] = std::max(our_ticks[i], their_ticks[j]);
      } else {
        any_new = true;
      }
    }
    if (!any_new) return;
    // Streams new to the set: inserted one by one (the rarer case; those already there
    // hold the larger tick and are left as they are by insert).
    for (std::size_t j = 0; j < theirs.size(); ++j)
      if (!(skipping && theirs[j] == skipped)) insert(theirs[j], their_ticks[j]);
  }
  std::span<std::uint64_t> ticks() noexcept {
    return size_ <= kInline ? std::span<std::uint64_t>(inline_ticks_.data(), size_) : std::span<std::uint64_t>(overflow_ticks_);
  }
};

}  // namespace fragless::core
