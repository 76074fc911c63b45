// Step instances: a trace's pass taken as one loop step, the offline problem a loop plan
// lays out (Note [Loop plans] in allocator/core/loop_plan.hpp), so that the layout stage
// can be measured apart from the replay (`fragless-bench layout`, Note [Layout bench]) and
// the same problem handed to an offline solver.
// Invariant: an instance's blocks are the trace's large-pool requests, 512 B-rounded as
// the pool places them (the small pool's slabs are never in a plan), each alive from its
// allocation to its free in the order of those requests, or to the pass's end (where the
// replay frees what is left, each free a request of its own, the block made last first);
// its peak is the most bytes alive at once.
// Plain C++, no device and no allocator state: the layout functions are libfragless's own
// (allocator/core/step_layout.hpp), linked from its core library.
#pragma once

#include "core/step_layout.hpp"
#include "traces/trace.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace fragless::bench {

struct step_instance {
  std::string name;
  std::size_t phases = 0;      // the pass's large-pool requests (allocations and frees)
  std::size_t peak_bytes = 0;  // the most bytes alive at once: no layout is narrower
  std::vector<core::step_block> blocks;
};

// The pass of `t` as a step. Placing starts after the request that leaves the fewest bytes
// alive, as a plan's does (each block's from_start counts from there).
step_instance step_instance_of(const traces::trace& t);

// Whether no two blocks whose lifetimes meet share a byte; on a conflict, says which.
bool layout_is_valid(const std::vector<core::step_block>& blocks, std::string* conflict);

// The instance as text for an offline solver: "fragless-step 1", "phases P", "peak B", then
// one line per block: "size first_begin first_end second_end stream" (lifetimes as in
// core::step_block: [first_begin, first_end) plus [0, second_end) when it wraps).
std::string format_step_instance(const step_instance& instance);

}  // namespace fragless::bench
