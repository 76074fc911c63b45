// The call registry behind the common prologue: one slot per runtime/driver function name,
// holding its call counter, its injected faults and its modelled cost.
// Invariant: the set of names is fixed at start (every export of the real libcudart.so.13
// and libcuda.so.1), so indices never move and counters can be read without a lock.
#pragma once

#include <cstdint>
#include <string_view>

namespace simcuda::calls {

int index_of(std::string_view name);  // -1 when unknown
const char* name_of(int index);
uint64_t count(int index);
void reset_counts();
// Fault injection: see simcuda_fail in control.h.
bool add_fault(int index, uint64_t nth, int error_code, bool from_nth);
void clear_faults();
void set_cost_ns(int index, uint64_t nanoseconds);
// Note [Emulation time]: times the top-level calls of a function; the calling thread's
// total time inside timed calls.
void set_timed(int index, bool on);
uint64_t thread_emulation_ns();

}  // namespace simcuda::calls
