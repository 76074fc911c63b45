// layout_command: `fragless-bench layout` -- the loop plans' layout stage alone, on every
// corpus seed's pass (or on trace files) taken as one step (Note [Layout bench]): how far
// above the step's peak its layout ends, and how long laying it out takes.
// Invariant: every instance is laid out by libfragless's own lay_out_narrowest and checked
// (no two blocks alive together share a byte); an invalid layout fails the run (exit 1).
#pragma once

#include "bench_options.hpp"

namespace fragless::bench {

int run_layout(const bench_options& options);

}  // namespace fragless::bench
