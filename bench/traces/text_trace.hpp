// text_trace: our compact, versioned text trace format (bench/TRACE_FORMAT.md) and the
// loader that recognises every supported input by its content.
// Invariant: write_text_trace followed by read_text_trace gives back the same trace
// (events, seeds, streams, recorded curve, notes).
#pragma once

#include "trace.hpp"

#include <string>
#include <string_view>

namespace fragless::traces {

inline constexpr std::string_view text_trace_magic = "fragless-trace";
inline constexpr int text_trace_version = 1;

std::string write_text_trace(const trace& t);
trace read_text_trace(std::string_view text, const std::string& name);

enum class input_format { pytorch_snapshot, rmm_csv, lifetime_csv, fragless_text, unknown };

// Decides the format from the first bytes (pickle PROTO opcode, magic line, CSV header).
input_format detect_format(std::string_view bytes);

// Reads a whole file and converts it; the trace is named after the file's path relative
// to nothing (the caller passes the display name). Throws trace_error / pickle_error with
// the display name and position in the message. Empty files are errors.
trace load_trace_file(const std::string& path, const std::string& display_name);

// Reads a file's bytes (throws trace_error naming the file when it cannot).
std::string read_file_bytes(const std::string& path);

}  // namespace fragless::traces
