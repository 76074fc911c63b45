// Micro benchmark of libfragless's host cost: an alloc+free pair on the cache-hit path,
// single thread on one stream, and two threads on two streams; and (--stats-stall) how long
// reading the layout stats holds up allocations.
#pragma once

#include <cstddef>

namespace fragless::bench {

// `fragless-bench micro [--size BYTES] [--pairs N] [--reps N] [--json]`.
// Prints medians (thread CPU ns per pair; wall too) and the two-thread throughput ratio
// next to what a trivially parallel loop achieves on the machine at the time. Returns an
// exit code.
int run_micro(int argc, char** argv);

// `fragless-bench micro --stats-stall [--live N] [--seconds S] [--json]`: free+allocate
// pairs among N live blocks while another thread reads get_device_stats every 20 ms; prints
// the pairs' median, 99.9th percentile and longest, and the reads' times (stats_stall.cpp).
int run_stats_stall(std::size_t live_blocks, double seconds, bool json);

}  // namespace fragless::bench
