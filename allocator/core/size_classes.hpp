// Size classes of the small pool: which requests are "small" and what each rounds to.
// Invariant: every class size is a multiple of kBlockAlignment (512 B), so every block the
// allocator hands out is 512 B aligned, and class_size(class_of(n)) >= round_up(n, 512)
// with the waste bound of Note [Size classes].
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace fragless::core {

// Note [Size classes]
// Requests are first rounded up to 512 B (like PyTorch's kMinBlockSize; the "ideal"
// reserved figure is defined on 512 B-rounded live bytes, so this rounding is not waste
// we are judged on). Small requests (rounded size <= 64 KiB) then round to a class:
//   512, 1024, 1536, ..., 4096                       (every multiple of 512: no waste)
//   then 8 classes per power of two above 4 KiB:     (2^k, 2^(k+1)] in steps of 2^k / 8
//   4608, 5120, ..., 8192, 9216, ..., 16384, ..., 32768, 36864, ..., 65536
// 40 classes in all. Bound: for a rounded request r in (2^k, 2^(k+1)], k >= 12, the class
// is < r + 2^k / 8 <= r * 9/8, so the rounding waste above the 512 B-rounded size is
// strictly below 12.5 % of it (zero at or below 4 KiB). Larger requests go to the large
// index at 512 B granularity (no class rounding at all). 64 KiB keeps slab tails small:
// a slab holds at most max(8 objects, 64 KiB), so a half-used slab pins at most 512 KiB.

// Note [Slab growth]
// A shard's first slab of a class is small -- max(1 object, 8 KiB) -- and each further
// slab of that class doubles, up to the full size of max(8 objects, 64 KiB). A workload
// that touches many classes a little (compiler-planned buffers, a small model) then pins
// a few KiB per class instead of 64 KiB, so a 1 MiB workload fits its 2 MiB page; a class
// in heavy use reaches full slabs after three or four slow-path refills. A shard never
// starts a class small again: once its empty slabs were given back (a loop plan wanting
// room, empty_cache), its next slab of a class is as large as the largest it had
// (stream_shard::class_slab_doublings), since the class showed that much use. Restarting
// from one object made a many-stream loop refill every class from scratch in the pass
// where its plan took over: corpus many-streams seed 17 made 224 slabs there for 620
// small requests. 150 seeds each of many-streams and params-optimizer, five repetitions:
// steady-pass calls 58 -> 12, seeds calling in the fifth pass 8 -> 5, peaks the same
// (1.0135x the ideal), host time the same within noise.
inline constexpr std::size_t kBlockAlignment = 512;
inline constexpr std::size_t kSmallLimitBytes = 64 * 1024;
inline constexpr std::size_t kClassCount = 40;

constexpr std::size_t round_up(std::size_t value, std::size_t multiple) noexcept {
  return (value + multiple - 1) / multiple * multiple;
}

// 512 B-rounded request (0 B rounds to 512 B: every block has an address of its own).
constexpr std::size_t rounded_request_bytes(std::size_t request_bytes) noexcept {
  return request_bytes == 0 ? kBlockAlignment : round_up(request_bytes, kBlockAlignment);
}

constexpr bool is_small(std::size_t request_bytes) noexcept {
  return request_bytes <= kSmallLimitBytes;
}

// Index of the class serving a small request. Precondition: is_small(request_bytes).
std::size_t class_of(std::size_t request_bytes) noexcept;
std::size_t class_size_bytes(std::size_t class_index) noexcept;
// Bytes of a new slab of a class when the shard already has `slabs_of_class` of them
// (Note [Slab growth]): a multiple of the class size, from max(1 object, 8 KiB) doubling
// up to max(8 objects, 64 KiB).
std::size_t slab_bytes(std::size_t class_index, std::size_t slabs_of_class) noexcept;
// The full size (max(8 objects, 64 KiB)).
std::size_t full_slab_bytes(std::size_t class_index) noexcept;

}  // namespace fragless::core
