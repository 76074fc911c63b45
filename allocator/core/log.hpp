// Logging for libfragless: one logger writing "[fragless] ..." lines to stderr, level from
// FRAGLESS_LOG_LEVEL (trace, debug, info, warn, error, off; default warn). spdlog stays
// inside log.cpp (header-only, hidden), so nothing of it is exported or included here.
// Invariant: logging never throws and never aborts the host program.
#pragma once

#include <string>

namespace fragless::core {

enum class log_level { trace = 0, debug = 1, info = 2, warn = 3, error = 4, off = 6 };

// Cheap check, to skip building messages nobody will see.
bool log_enabled(log_level level) noexcept;
void log_message(log_level level, const std::string& message) noexcept;

}  // namespace fragless::core
