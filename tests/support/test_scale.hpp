// test_scale: how much work a randomized test does in this build. Invariant: a sanitizer
// build runs the same cases over the same paths, only fewer rounds of them.
//
// Note [Sanitizer scale]
// ~~~~~~~~~~~~~~~~~~~~~~
// Under AddressSanitizer an allocator test runs 10-50 times slower, under ThreadSanitizer
// 40-100 times (every atomic, lock and container access is instrumented). The sanitizers
// find a bad access or a race the first time a path runs; the many rounds a randomized test
// repeats serve the plain build's search for a wrong result, which the plain build runs at
// full scale. So the sanitizer builds take a quarter of the rounds (`for_build`), keeping
// CI's two sanitizer stages within their time, and every case still runs there.
#pragma once

namespace fragless::testing {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool sanitizer_build = true;
#else
inline constexpr bool sanitizer_build = false;
#endif

// `plain` rounds in the plain build, a quarter of them (at least one) under a sanitizer.
inline constexpr int for_build(int plain) { return sanitizer_build ? (plain + 3) / 4 : plain; }

}  // namespace fragless::testing
