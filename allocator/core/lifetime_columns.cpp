// Lifetime columns, the wide test: meeting_bits eight lifetimes at a time where the
// processor has AVX2, chosen once when the library loads (Note [Wide lifetime tests]).
// Invariant: the wide test sets exactly the bits the narrow one does (lifetimes_meet, term
// for term); it is used only where the processor reports AVX2.
// Plain C++ (vector extensions, a target attribute), no shared state after load.
#include "core/lifetime_columns.hpp"

namespace fragless::core {

// Note [Wide lifetime tests]
// The greedy layout and the searches after it spend most of a large step's layout in
// meeting_bits (corpus rlhf-ppo seed 842, a 19,243-block step: lay_out_in 61 % of its
// layout time, `perf`). Built for any x86-64, the test is four lanes of SSE2; a processor
// with AVX2 -- every one a data-centre GPU sits beside -- tests eight at once. So the
// same test, compiled for AVX2 with eight-lane vectors, is taken when the processor
// reports AVX2 (checked once, when the library loads), and the four-lane one otherwise.
// Eight-lane vectors compiled without AVX2 are two SSE2 halves each and were 2.5x slower
// than four lanes: the wide test exists only behind the check. Both are one template
// (meeting_bits_in_lanes), always inlined, so this instance is compiled for AVX2; the
// wide test is a function call per 64 entries, not inlined into its callers.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
namespace {

__attribute__((target("avx2"))) std::uint64_t wide_meeting_bits(const std::uint32_t* begins,
                                                                  const std::uint32_t* ends,
                                                                  const std::uint32_t* second_ends,
                                                                  std::size_t count, std::uint32_t begin,
                                                                  std::uint32_t end, std::uint32_t second_end) {
  typedef std::uint32_t wide_lanes __attribute__((vector_size(32)));
  return lifetime_columns::meeting_bits_in_lanes<wide_lanes, 8>(begins, ends, second_ends, count, begin, end,
                                                                second_end);
}

lifetime_columns::meeting_bits_function wide_if_supported() noexcept {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") ? &wide_meeting_bits : nullptr;
}

}  // namespace

const lifetime_columns::meeting_bits_function lifetime_columns::kWideMeetingBits = wide_if_supported();
#else
const lifetime_columns::meeting_bits_function lifetime_columns::kWideMeetingBits = nullptr;
#endif

}  // namespace fragless::core
