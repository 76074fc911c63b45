// FRAGLESS_CONF parsing: "key:value,key:value" into fragless::options. Invariant: never
// throws, never aborts; each problem gives exactly one warning naming the key and what is
// accepted, and the option keeps its previous (default) value.
//
// Note [Bounded warnings]
// A FRAGLESS_CONF with hundreds of bad entries must not flood the program's stderr: the
// known keys are listed only in the first unknown-key warning of a parse; on stderr (no
// callback given) a parse prints at most kMaxStderrWarnings warnings and then one line
// saying how many more it left out; and FRAGLESS_LOG_LEVEL=error or off silences warnings
// on stderr entirely, as it does the allocator's log. A callback still receives one warning
// per problem.
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "fragless/options.hpp"

namespace fragless {
namespace {

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

// Printable, bounded echo of user text inside a warning.
std::string quoted(std::string_view text) {
  std::string out = "\"";
  for (char c : text.substr(0, 64)) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f) {
      out += c;
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out += escaped;
    }
  }
  if (text.size() > 64) out += "...";
  return out + "\"";
}

bool parse_bool(std::string_view text, bool& value) {
  if (text == "True" || text == "true" || text == "1") {
    value = true;
    return true;
  }
  if (text == "False" || text == "false" || text == "0") {
    value = false;
    return true;
  }
  return false;
}

bool parse_fraction(std::string_view text, double& value) {
  if (text.empty() || text.size() > 64) return false;
  const std::string copy(text);
  char* end = nullptr;
  const double parsed = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size() || !std::isfinite(parsed)) return false;
  // Reject hex floats and the like: digits, one '.', optional exponent only.
  for (char c : copy)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' || c == '-' || c == '+'))
      return false;
  if (!(parsed == 0.0 || (parsed > 0.0 && parsed < 1.0))) return false;
  value = parsed;
  return true;
}

bool parse_backend(std::string_view text, backend_kind& value) {
  if (text == "auto") value = backend_kind::automatic;
  else if (text == "vmm") value = backend_kind::vmm;
  else if (text == "cudaMalloc") value = backend_kind::cuda_malloc;
  else return false;
  return true;
}

bool in_range(std::uint64_t value, std::uint64_t min_value, std::uint64_t max_value) {
  return value >= min_value && value <= max_value;
}

constexpr std::size_t kMaxStderrWarnings = 8;  // Note [Bounded warnings]

// FRAGLESS_LOG_LEVEL above warn (error, off): no warnings on stderr (Note [Bounded warnings]).
bool stderr_warnings_silenced() noexcept {
  const char* level = std::getenv("FRAGLESS_LOG_LEVEL");
  if (level == nullptr) return false;
  const std::string_view name(level);
  return name == "error" || name == "off";
}

// Applies one key:value; returns the warning text, empty when accepted. `list_known_keys`:
// name every known key in an unknown-key warning (the first of a parse, Note [Bounded warnings]).
std::string apply(options& values, std::string_view key, std::string_view text, bool list_known_keys) {
  const option_info* row = find_option(key);
  if (row == nullptr) {
    std::string message = "unknown FRAGLESS_CONF key " + quoted(key) + " ignored; ";
    if (!list_known_keys) return message + "known keys as listed in the first such warning";
    message += "known keys:";
    // Appends, not `" " + std::string(...)`: GCC 12 at -O3 reports a false -Wrestrict for
    // operator+(const char*, std::string&&) (it inserts at the front of the temporary).
    for (const option_info& known : option_table()) message.append(" ").append(known.key);
    return message;
  }
  const auto rejected = [&](std::string_view why) {
    std::string message = "FRAGLESS_CONF " + std::string(key) + ": bad value " + quoted(text);
    if (!why.empty()) message.append(" (").append(why).append(")");
    message.append("; accepted: ").append(row->accepted).append("; keeping ");
    return message.append(option_value_text(values, key));
  };
  std::string error;
#define FRAGLESS_OPTION_SIZE(option_key, default_bytes, min_bytes, max_bytes, allows_unlimited, description) \
  if (key == #option_key) {                                                                                     \
    std::uint64_t bytes = 0;                                                                                    \
    if (!parse_size_bytes(text, allows_unlimited, bytes, error)) return rejected(error);                        \
    const bool unlimited = (allows_unlimited) && bytes == unlimited_bytes;                                      \
    if (!unlimited && !in_range(bytes, min_bytes, max_bytes)) return rejected("out of range");                   \
    values.option_key = bytes;                                                                                  \
    return {};                                                                                                  \
  }
#define FRAGLESS_OPTION_FRACTION(option_key, default_value, description)   \
  if (key == #option_key) {                                                \
    double fraction = 0;                                                   \
    if (!parse_fraction(text, fraction)) return rejected("");              \
    values.option_key = fraction;                                          \
    return {};                                                             \
  }
#define FRAGLESS_OPTION_BOOL(option_key, default_value, description) \
  if (key == #option_key) {                                          \
    bool flag = false;                                               \
    if (!parse_bool(text, flag)) return rejected("");                \
    values.option_key = flag;                                        \
    return {};                                                       \
  }
#define FRAGLESS_OPTION_BACKEND(option_key, default_value, description) \
  if (key == #option_key) {                                             \
    backend_kind kind{};                                                \
    if (!parse_backend(text, kind)) return rejected("");                \
    values.option_key = kind;                                           \
    return {};                                                          \
  }
#include "fragless/options_fields.def"
  return {};
}

}  // namespace

void warn_to_stderr_once(std::string_view message) noexcept {
  if (stderr_warnings_silenced()) return;
  try {
    static std::mutex mutex;
    static std::set<std::string, std::less<>> seen;
    std::lock_guard<std::mutex> lock(mutex);
    if (!seen.insert(std::string(message)).second) return;
    std::fprintf(stderr, "fragless: warning: %.*s\n", static_cast<int>(message.size()), message.data());
  } catch (...) {
    // Out of memory while warning: the warning is dropped, the host program goes on.
  }
}

options parse_options(std::string_view conf, const option_warning_callback& warn, const options& base) noexcept {
  options values = base;
  std::size_t stderr_warnings = 0, left_out = 0;
  const auto report = [&](const std::string& message) noexcept {
    try {
      if (warn) warn(message);
      else if (stderr_warnings < kMaxStderrWarnings) {
        ++stderr_warnings;
        warn_to_stderr_once(message);
      } else {
        ++left_out;  // Note [Bounded warnings]
      }
    } catch (...) {
    }
  };
  bool listed_known_keys = false;
  try {
    std::vector<std::string> seen_keys;
    while (!conf.empty()) {
      const std::size_t comma = conf.find(',');
      std::string_view entry = trim(conf.substr(0, comma));
      conf = comma == std::string_view::npos ? std::string_view{} : conf.substr(comma + 1);
      if (entry.empty()) continue;
      const std::size_t colon = entry.find(':');
      if (colon == std::string_view::npos) {
        report("FRAGLESS_CONF entry " + quoted(entry) + " has no ':' (expected key:value); ignored");
        continue;
      }
      const std::string_view key = trim(entry.substr(0, colon));
      const std::string_view value = trim(entry.substr(colon + 1));
      if (find_option(key) != nullptr) {
        bool repeated = false;
        for (const std::string& seen : seen_keys) repeated = repeated || seen == key;
        if (repeated) report("FRAGLESS_CONF key " + std::string(key) + " given more than once; the last value wins");
        else seen_keys.emplace_back(key);
      }
      const bool unknown = find_option(key) == nullptr;
      const std::string message = apply(values, key, value, unknown && !listed_known_keys);
      listed_known_keys = listed_known_keys || unknown;
      if (!message.empty()) report(message);
    }
    if (left_out > 0)
      warn_to_stderr_once(std::to_string(left_out) + " more FRAGLESS_CONF problem" + (left_out == 1 ? "" : "s") +
                          " not shown");
  } catch (...) {
    report("FRAGLESS_CONF could not be parsed (out of memory); using defaults");
    return base;
  }
  return values;
}

options options_from_environment(const option_warning_callback& warn) noexcept {
  const char* conf = std::getenv("FRAGLESS_CONF");
  return parse_options(conf == nullptr ? std::string_view{} : std::string_view{conf}, warn);
}

std::string option_value_text(const options& values, std::string_view key) {
#define FRAGLESS_OPTION_SIZE(option_key, default_bytes, min_bytes, max_bytes, allows_unlimited, description) \
  if (key == #option_key) return format_size_bytes(values.option_key);
#define FRAGLESS_OPTION_FRACTION(option_key, default_value, description) \
  if (key == #option_key) {                                              \
    /* the shortest text that reads back as the same value */            \
    char text[32];                                                       \
    auto written = std::to_chars(text, text + sizeof text, values.option_key); \
    return std::string(text, written.ptr);                               \
  }
#define FRAGLESS_OPTION_BOOL(option_key, default_value, description) \
  if (key == #option_key) return values.option_key ? "True" : "False";
#define FRAGLESS_OPTION_BACKEND(option_key, default_value, description)          \
  if (key == #option_key) {                                                      \
    switch (values.option_key) {                                                 \
      case backend_kind::vmm: return "vmm";                                      \
      case backend_kind::cuda_malloc: return "cudaMalloc";                       \
      case backend_kind::automatic: break;                                       \
    }                                                                            \
    return "auto";                                                               \
  }
#include "fragless/options_fields.def"
  return {};
}

std::string to_conf_string(const options& values) {
  std::string conf;
  for (const option_info& row : option_table()) {
    if (!conf.empty()) conf += ',';
    conf += std::string(row.key) + ":" + option_value_text(values, row.key);
  }
  return conf;
}

bool operator==(const options& a, const options& b) noexcept {
  bool same = true;
#define FRAGLESS_OPTION_SIZE(option_key, default_bytes, min_bytes, max_bytes, allows_unlimited, description) \
  same = same && a.option_key == b.option_key;
#define FRAGLESS_OPTION_FRACTION(option_key, default_value, description) same = same && a.option_key == b.option_key;
#define FRAGLESS_OPTION_BOOL(option_key, default_value, description) same = same && a.option_key == b.option_key;
#define FRAGLESS_OPTION_BACKEND(option_key, default_value, description) same = same && a.option_key == b.option_key;
#include "fragless/options_fields.def"
  return same;
}

}  // namespace fragless
