// The libfragless logger (see log.hpp).
#include "core/log.hpp"

#include <spdlog/logger.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <cstdlib>
#include <memory>
#include <string_view>

namespace fragless::core {
namespace {

spdlog::level::level_enum level_from_environment() noexcept {
  const char* text = std::getenv("FRAGLESS_LOG_LEVEL");
  if (text == nullptr) return spdlog::level::warn;
  const std::string_view name(text);
  if (name == "trace") return spdlog::level::trace;
  if (name == "debug") return spdlog::level::debug;
  if (name == "info") return spdlog::level::info;
  if (name == "warn" || name == "warning") return spdlog::level::warn;
  if (name == "error") return spdlog::level::err;
  if (name == "off") return spdlog::level::off;
  return spdlog::level::warn;  // bad value: keep the default (and say so once, below)
}

spdlog::logger* logger() noexcept {
  static spdlog::logger* const instance = []() -> spdlog::logger* {
    try {
      // Never destroyed: frees and teardown may log during static destruction.
      auto* made = new spdlog::logger("fragless", std::make_shared<spdlog::sinks::stderr_sink_mt>());
      made->set_pattern("[fragless] [%l] %v");
      made->set_level(level_from_environment());
      const char* text = std::getenv("FRAGLESS_LOG_LEVEL");
      if (text != nullptr && made->level() == spdlog::level::warn && std::string_view(text) != "warn" &&
          std::string_view(text) != "warning")
        made->warn("FRAGLESS_LOG_LEVEL={} is not one of trace, debug, info, warn, error, off; using warn", text);
      return made;
    } catch (...) {
      return nullptr;
    }
  }();
  return instance;
}

}  // namespace

bool log_enabled(log_level level) noexcept {
  spdlog::logger* target = logger();
  return target != nullptr && target->should_log(static_cast<spdlog::level::level_enum>(level));
}

void log_message(log_level level, const std::string& message) noexcept {
  try {
    if (spdlog::logger* target = logger()) target->log(static_cast<spdlog::level::level_enum>(level), message);
  } catch (...) {
  }
}

}  // namespace fragless::core
