// Micro benchmark of libfragless's host cost: an alloc+free pair on the cache-hit path,
// single thread on one stream, and two threads on two streams.
#pragma once

namespace fragless::bench {

// `fragless-bench micro [--size BYTES] [--pairs N] [--reps N] [--json]`.
// Prints medians (thread CPU ns per pair; wall too) and the two-thread throughput ratio
// next to what a trivially parallel loop achieves on the machine at the time. Returns an
// exit code.
int run_micro(int argc, char** argv);

}  // namespace fragless::bench
