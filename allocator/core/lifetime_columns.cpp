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
// than four lanes: the wide test exists only behind the check. The test is a function
// call per 64 entries, not inlined into its callers.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
namespace {

__attribute__((target("avx2"))) std::uint64_t wide_meeting_bits(const std::uint32_t* begins,
                                                                  const std::uint32_t* ends,
                                                                  const std::uint32_t* second_ends,
                                                                  std::size_t count, std::uint32_t begin,
                                                                  std::uint32_t end, std::uint32_t second_end) {
  typedef std::uint32_t wide_lanes __attribute__((vector_size(32)));
  constexpr std::size_t kWideLanes = 8;
  std::uint64_t bits = 0;
  const std::uint32_t wraps = second_end > 0 ? ~std::uint32_t{0} : 0;
  // 32 tests per half word: lane i of group g holds bit 8 g + i, folded across lanes once.
  for (std::size_t half = 0; half < count; half += 32) {
    wide_lanes folded = {0, 0, 0, 0, 0, 0, 0, 0};
    wide_lanes lane_bits = {1, 2, 4, 8, 16, 32, 64, 128};
    const std::size_t half_end = count - half < 32 ? count : half + 32;
    for (std::size_t lane = half; lane < half_end; lane += kWideLanes, lane_bits <<= kWideLanes) {
      wide_lanes other_begin, other_end, other_second_end;
      std::memcpy(&other_begin, &begins[lane], sizeof other_begin);
      std::memcpy(&other_end, &ends[lane], sizeof other_end);
      std::memcpy(&other_second_end, &second_ends[lane], sizeof other_second_end);
      const wide_lanes meet = (wide_lanes)((begin < other_end) & (other_begin < end)) |
                              (wide_lanes)(begin < other_second_end) | (wide_lanes)(other_begin < second_end) |
                              (wraps & (wide_lanes)(other_second_end > 0));
      folded |= meet & lane_bits;
    }
    bits |= static_cast<std::uint64_t>(folded[0] | folded[1] | folded[2] | folded[3] | folded[4] | folded[5] |
                                       folded[6] | folded[7])
            << half;
  }
  if (count < 64) bits &= (std::uint64_t{1} << count) - 1;
  return bits;
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
