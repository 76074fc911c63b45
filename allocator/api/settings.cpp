// Reads the allocator's settings from FRAGLESS_CONF ("key:value,key:value").
// Keys read here: backend (vmm | cudaMalloc), virtual_range_factor (> 1),
// unsafe_skip_stream_waits (test-only: true | false). Bad values warn on stderr and keep
// the default; unknown keys are left to the full options table (fragless_config).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/allocator.hpp"

namespace fragless::core {
namespace {

void warn(const std::string& key, const std::string& value, const char* expected) {
  std::fprintf(stderr, "fragless: FRAGLESS_CONF %s:%s is invalid (expected %s); keeping the default\n", key.c_str(),
               value.c_str(), expected);
}

void apply(cache_settings& settings, const std::string& key, const std::string& value) {
  if (key == "backend") {
    if (value == "vmm") settings.use_vmm = true;
    else if (value == "cudaMalloc" || value == "cudamalloc") settings.use_vmm = false;
    else warn(key, value, "vmm or cudaMalloc");
  } else if (key == "virtual_range_factor") {
    char* end = nullptr;
    const double factor = std::strtod(value.c_str(), &end);
    if (end != value.c_str() && *end == '\0' && factor > 1.0 && factor <= 64.0) settings.virtual_range_factor = factor;
    else warn(key, value, "a number in (1, 64]");
  } else if (key == "unsafe_skip_stream_waits") {
    if (value == "true" || value == "1") settings.unsafe_skip_stream_waits = true;
    else if (value == "false" || value == "0") settings.unsafe_skip_stream_waits = false;
    else warn(key, value, "true or false");
  }
}

}  // namespace

cache_settings settings_from_environment() {
  cache_settings settings;
  const char* conf = std::getenv("FRAGLESS_CONF");
  if (conf == nullptr) return settings;
  const std::string text(conf);
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(start, end - start);
    const std::size_t colon = item.find(':');
    if (colon != std::string::npos) apply(settings, item.substr(0, colon), item.substr(colon + 1));
    start = end + 1;
  }
  return settings;
}

}  // namespace fragless::core
