// csv_readers: RMM logging_resource_adaptor logs and buffer-lifetime CSVs to traces.
// Invariant: columns are found by header name (order free, extra columns ignored); a
// missing column or a bad field is a trace_error naming the file, line and column.
#pragma once

#include "trace.hpp"

#include <string>
#include <string_view>

namespace fragless::traces {

// RMM log: header `Thread,Time,Action,Pointer,Size,Stream`; actions `allocate`, `free`,
// `allocate failure` (failures are counted in the notes, not replayed).
trace read_rmm_csv(std::string_view text, const std::string& name);

// Lifetime CSV: header `id,lower,upper,size`; buffer live over [lower, upper). At equal
// times, frees come before allocations; ties keep file order.
trace read_lifetime_csv(std::string_view text, const std::string& name);

}  // namespace fragless::traces
