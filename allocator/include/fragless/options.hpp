// fragless options: the plain struct the allocator reads, and the FRAGLESS_CONF parser.
// Every option comes from options_fields.def (name, default, range, description); the
// struct, the parser, --help and the README table are generated from that list.
// Invariant: parse_options never throws and never aborts; a bad key or value produces one
// warning (naming the key and what is accepted) and leaves the default in place.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <limits>
#include <span>
#include <string>
#include <string_view>

namespace fragless {

inline constexpr std::uint64_t kibibyte = 1024;
inline constexpr std::uint64_t mebibyte = 1024 * kibibyte;
inline constexpr std::uint64_t gibibyte = 1024 * mebibyte;
// The stored value of a size option set to "unlimited".
inline constexpr std::uint64_t unlimited_bytes = std::numeric_limits<std::uint64_t>::max();

enum class backend_kind : std::uint8_t { automatic, vmm, cuda_malloc };

// The parsed configuration. Default-constructed == every option at its default.
struct options {
#define FRAGLESS_OPTION_SIZE(key, default_bytes, min_bytes, max_bytes, allows_unlimited, description) \
  std::uint64_t key = default_bytes;
#define FRAGLESS_OPTION_FRACTION(key, default_value, description) double key = default_value;
#define FRAGLESS_OPTION_BOOL(key, default_value, description) bool key = default_value;
#define FRAGLESS_OPTION_BACKEND(key, default_value, description) backend_kind key = default_value;
#include "fragless/options_fields.def"
};

// Note [Size units]
// A size is a non-negative decimal number, optionally with a fraction, followed by an
// optional unit (case-insensitive, spaces allowed between): B; KiB, MiB, GiB, TiB
// (powers of 1024); KB, MB, GB, TB (powers of 1000). "1.5GiB" is 1610612736 bytes; a
// fraction of a byte is rounded down. Options that allow it also take "unlimited".
// Anything else, or a value past 2^64 - 1, is rejected with a warning.

enum class option_kind : std::uint8_t { size, fraction, boolean, backend };

// One row of the options table.
struct option_info {
  std::string_view key;
  option_kind kind;
  std::string_view default_text;  // as a user would write it
  std::string_view unit;          // "bytes", "fraction", "bool", "enum"
  std::string_view accepted;      // the accepted range or values, for messages and --help
  std::string_view description;
};

// Every option, in options_fields.def order.
std::span<const option_info> option_table() noexcept;
const option_info* find_option(std::string_view key) noexcept;

// Receives one warning message per problem (no trailing newline). Must not throw.
using option_warning_callback = std::function<void(std::string_view message)>;

// Writes "fragless: warning: <message>" to stderr, each distinct message once per process;
// nothing when FRAGLESS_LOG_LEVEL is error or off (Note [Bounded warnings]).
void warn_to_stderr_once(std::string_view message) noexcept;

// Parses "key:value,key:value" (PYTORCH_CUDA_ALLOC_CONF syntax; spaces around keys and
// values ignored; empty entries ignored; a repeated key warns and the last value wins).
// Starts from `base` (the defaults unless given). A null callback means warn_to_stderr_once,
// at most a few warnings per parse (Note [Bounded warnings] in config/option_parser.cpp).
options parse_options(std::string_view conf, const option_warning_callback& warn = {},
                      const options& base = options{}) noexcept;
// parse_options(getenv("FRAGLESS_CONF")); defaults when unset.
options options_from_environment(const option_warning_callback& warn = {}) noexcept;

// Value text of one option as the parser accepts it ("4GiB", "True", "vmm", "unlimited").
std::string option_value_text(const options& values, std::string_view key);
// "key:value,..." for every option: parse_options(to_conf_string(x)) == x.
std::string to_conf_string(const options& values);
bool operator==(const options& a, const options& b) noexcept;

// The table as plain text for --help, and as a Markdown table for the README.
void print_options_help(std::ostream& out);
std::string options_markdown_table();

// Sizes: parse per Note [Size units] (false on error, `error` says why); format with the
// largest binary unit that divides exactly ("4GiB", "1536KiB", "513B").
bool parse_size_bytes(std::string_view text, bool allows_unlimited, std::uint64_t& bytes, std::string& error);
std::string format_size_bytes(std::uint64_t bytes);
// For people, not the parser: "512 bytes" below 1 KiB, else two decimals in the largest
// binary unit up to PiB ("1.50 KiB", "7.38 GiB") -- PyTorch's format_size. The one byte
// formatter of log lines, error messages, the benchmark's table and fragless-stats.
std::string format_bytes_readable(double bytes);
inline std::string format_bytes_readable(std::uint64_t bytes) { return format_bytes_readable(static_cast<double>(bytes)); }

}  // namespace fragless
