// The race oracle: records unordered overlapping accesses and accesses to memory that is
// not allocated/mapped (Note [Race rule] in race_oracle.cpp).
// Invariant: state().race_count == number of reports ever made since the last reset,
// even when the kept report text is capped.
#pragma once

#include <cstdint>
#include <string>

#include "device_state.h"

namespace simcuda {

void report_race_locked(std::string text);
// Checks a newly launched op of `stream` against every pending op of the other streams.
void check_launch_races_locked(const Stream& stream, const PendingOp& op);
// Freeing or unmapping [begin, end) while a pending op touches it is a race.
void report_release_races_locked(uintptr_t begin, uintptr_t end, const char* what);

}  // namespace simcuda
