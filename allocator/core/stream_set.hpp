// A small set of streams: the streams whose queued work may still touch a free range
// (see Note [Stream reuse] in device_cache_free.cpp), each with the order tick of its
// latest free into the range (Note [Standing waits], event_pool.hpp); the event pool also
// keeps a stream's standing waits in one, each source with the tick waited up to.
// Invariant: sorted by stream, no duplicates; a stream's tick is the largest it was given.
// Up to kInline streams live inside the object (Note [Inline streams]).
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

// Note [Inline streams]
// Free ranges are copied around the large pool (a best fit, a range looked up by address)
// and merged when they coalesce, and the event pool copies a stream's standing waits into
// each event it records (Note [Transitive waits]). A set of up to four streams lives inside
// the object, so those copies allocate no host memory; a larger one keeps every entry, a
// stream with its tick, in one heap array (one allocation per copy). A range freed by one
// stream is the common case; a many-stream loop merges the frees of several into one range
// and waits on several: on corpus many-streams seed 17 (ten streams), steady passes made
// 4.3 host allocations per allocation when streams and ticks were two arrays inlined for
// two streams, 1.1 now (the event pool also reuses the memory of the standing waits a
// replaced record carried).
class stream_set {
 public:
  // The tick of a free whose time is not known: no standing wait covers it.
  static constexpr std::uint64_t kUnknownTick = std::numeric_limits<std::uint64_t>::max();
  struct entry {
    stream_id stream;
    std::uint64_t freed_at_tick;  // of the stream's latest free (or the tick waited up to)
  };

  stream_set() = default;
  // One stream, inline: no heap, so no throw.
  explicit stream_set(stream_id stream, std::uint64_t freed_at_tick = kUnknownTick) noexcept
      : inline_{entry{stream, freed_at_tick}}, size_(1) {}
  stream_set(const stream_set&) = default;
  stream_set& operator=(const stream_set&) = default;  // reuses this set's heap array
  // A set moved from is empty (its heap array went with the move).
  stream_set(stream_set&& other) noexcept
      : inline_(other.inline_), size_(other.size_), overflow_(std::move(other.overflow_)) {
    other.size_ = 0;
  }
  stream_set& operator=(stream_set&& other) noexcept {
    if (this == &other) return *this;
    inline_ = other.inline_;
    size_ = other.size_;
    overflow_ = std::move(other.overflow_);
    other.size_ = 0;
    other.overflow_.clear();
    return *this;
  }

  bool empty() const noexcept { return size_ == 0; }
  std::size_t size() const noexcept { return size_; }
  // Every stream with its tick, by stream.
  std::span<const entry> entries() const noexcept {
    return size_ <= kInline ? std::span<const entry>(inline_.data(), size_) : std::span<const entry>(overflow_);
  }
  bool contains(stream_id stream) const noexcept { return find(stream) != nullptr; }
  // The tick of `stream`, or `absent` when it is not in the set.
  std::uint64_t tick_of(stream_id stream, std::uint64_t absent) const noexcept {
    const entry* found = find(stream);
    return found != nullptr ? found->freed_at_tick : absent;
  }
  // True when work on streams other than `stream` may still touch the range.
  bool foreign_to(stream_id stream) const noexcept {
    return !(size_ == 0 || (size_ == 1 && inline_[0].stream == stream));
  }
  // Adds `stream`; a stream already there keeps the later of the two ticks.
  void insert(stream_id stream, std::uint64_t freed_at_tick = kUnknownTick) {
    const std::span<entry> all = mutable_entries();
    const auto at = static_cast<std::size_t>(std::lower_bound(all.begin(), all.end(), stream, by_stream) - all.begin());
    if (at < size_ && all[at].stream == stream) {
      all[at].freed_at_tick = std::max(all[at].freed_at_tick, freed_at_tick);
      return;
    }
    const auto offset = static_cast<std::ptrdiff_t>(at);
    if (size_ < kInline) {
      std::move_backward(inline_.begin() + offset, inline_.begin() + static_cast<std::ptrdiff_t>(size_),
                         inline_.begin() + static_cast<std::ptrdiff_t>(size_) + 1);
      inline_[at] = entry{stream, freed_at_tick};
      ++size_;
      return;
    }
    if (size_ == kInline) {
      overflow_.reserve(kInline + 1);
      overflow_.assign(inline_.begin(), inline_.end());
    }
    overflow_.insert(overflow_.begin() + offset, entry{stream, freed_at_tick});
    size_ = overflow_.size();
  }
  // Every stream's latest free is now at `freed_at_tick` (the set describes a free made now).
  void stamp(std::uint64_t freed_at_tick) noexcept {
    for (entry& each : mutable_entries()) each.freed_at_tick = freed_at_tick;
  }
  // Replaces `from` by `to` (Note [Retired streams]); true when `from` was in the set.
  bool rename(stream_id from, stream_id to) {
    const entry* found = find(from);
    if (found == nullptr) return false;
    const std::uint64_t tick = found->freed_at_tick;
    erase(from);
    insert(to, tick);
    return true;
  }
  // Removes `stream` if it is there (Note [Retired streams]).
  void erase(stream_id stream) noexcept {
    const entry* found = find(stream);
    if (found == nullptr) return;
    const auto at = found - entries().data();
    if (size_ <= kInline) {
      std::move(inline_.begin() + at + 1, inline_.begin() + static_cast<std::ptrdiff_t>(size_), inline_.begin() + at);
      --size_;
      return;
    }
    overflow_.erase(overflow_.begin() + at);
    size_ = overflow_.size();
    if (size_ > kInline) return;
    std::copy(overflow_.begin(), overflow_.end(), inline_.begin());  // back inside the object
    overflow_.clear();
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
  }
  bool operator==(const stream_set& other) const noexcept {
    const auto a = entries();
    const auto b = other.entries();
    return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                      [](const entry& x, const entry& y) { return x.stream == y.stream; });
  }

 private:
  static constexpr std::size_t kInline = 4;  // Note [Inline streams]
  std::array<entry, kInline> inline_{};
  std::size_t size_ = 0;
  std::vector<entry> overflow_;  // every entry, when more than kInline

  static bool by_stream(const entry& a, stream_id b) noexcept { return a.stream < b; }
  const entry* find(stream_id stream) const noexcept {
    const auto all = entries();
    const auto found = std::lower_bound(all.begin(), all.end(), stream, by_stream);
    return found != all.end() && found->stream == stream ? &*found : nullptr;
  }
  std::span<entry> mutable_entries() noexcept {
    return size_ <= kInline ? std::span<entry>(inline_.data(), size_) : std::span<entry>(overflow_);
  }
  void merge_skipping(const stream_set& other, stream_id skipped, bool skipping) {
    const auto theirs = other.entries();
    const auto ours = mutable_entries();
    // Raise the ticks of streams both sets name, and count those new to this one.
    std::size_t new_count = 0;
    for (std::size_t i = 0, j = 0; j < theirs.size(); ++j) {
      if (skipping && theirs[j].stream == skipped) continue;
      while (i < ours.size() && ours[i].stream < theirs[j].stream) ++i;
      if (i < ours.size() && ours[i].stream == theirs[j].stream) {
        ours[i].freed_at_tick = std::max(ours[i].freed_at_tick, theirs[j].freed_at_tick);
      } else {
        ++new_count;
      }
    }
    if (new_count == 0) return;
    // The new streams go in by one merge from the back, into room made first (a set that
    // outgrows the object moves to its heap array before anything else changes).
    const std::size_t old_size = size_, total = size_ + new_count;
    if (total > kInline) {
      if (old_size <= kInline) {
        overflow_.reserve(total);
        overflow_.assign(inline_.begin(), inline_.begin() + static_cast<std::ptrdiff_t>(old_size));
      }
      overflow_.resize(total);
    }
    entry* const all = total > kInline ? overflow_.data() : inline_.data();
    std::size_t i = old_size, j = theirs.size(), out = total;
    while (j > 0) {
      const entry& next = theirs[j - 1];
      if (skipping && next.stream == skipped) {
        --j;
      } else if (i > 0 && all[i - 1].stream >= next.stream) {
        if (all[i - 1].stream == next.stream) --j;  // its tick was raised above
        all[--out] = all[--i];
      } else {
        all[--out] = next;
        --j;
      }
    }
    size_ = total;
  }
};

}  // namespace fragless::core
