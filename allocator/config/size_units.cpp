// Byte sizes with units, as FRAGLESS_CONF writes them. See Note [Size units] in
// fragless/options.hpp. Invariant: parsing never overflows silently; a value past
// 2^64 - 1 bytes is an error, never a wrapped number.
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <string>
#include <string_view>

#include "fragless/options.hpp"

namespace fragless {
namespace {

__extension__ typedef unsigned __int128 wide_unsigned;

struct size_unit {
  std::string_view name;
  std::uint64_t multiplier;
};

constexpr std::array<size_unit, 9> size_units{{
    {"b", 1},
    {"kib", kibibyte},
    {"mib", mebibyte},
    {"gib", gibibyte},
    {"tib", 1024 * gibibyte},
    {"kb", 1000},
    {"mb", 1000 * 1000},
    {"gb", 1000 * 1000 * 1000},
    {"tb", 1000ull * 1000 * 1000 * 1000},
}};

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

}  // namespace

bool parse_size_bytes(std::string_view text, bool allows_unlimited, std::uint64_t& bytes, std::string& error) {
  text = trim(text);
  if (text.empty()) {
    error = "empty value";
    return false;
  }
  if (lower(text) == "unlimited") {
    if (!allows_unlimited) {
      error = "\"unlimited\" is not accepted here";
      return false;
    }
    bytes = unlimited_bytes;
    return true;
  }
  // Integer part, then an optional fraction, each digit checked for overflow.
  std::size_t position = 0;
  std::uint64_t whole = 0;
  std::size_t whole_digits = 0;
  while (position < text.size() && std::isdigit(static_cast<unsigned char>(text[position]))) {
    const auto digit = static_cast<std::uint64_t>(text[position] - '0');
    if (whole > (unlimited_bytes - digit) / 10) {
      error = "number too large";
      return false;
    }
    whole = whole * 10 + digit;
    ++position;
    ++whole_digits;
  }
  // Up to 18 fraction digits kept as numerator / 10^n; the rest are ignored (rounding down).
  std::uint64_t fraction_numerator = 0;
  std::uint64_t fraction_denominator = 1;
  std::size_t fraction_digits = 0;
  if (position < text.size() && text[position] == '.') {
    ++position;
    while (position < text.size() && std::isdigit(static_cast<unsigned char>(text[position]))) {
      if (fraction_digits < 18) {
        fraction_numerator = fraction_numerator * 10 + static_cast<std::uint64_t>(text[position] - '0');
        fraction_denominator *= 10;
      }
      ++fraction_digits;
      ++position;
    }
    if (fraction_digits == 0) {
      error = "digits expected after '.'";
      return false;
    }
  }
  if (whole_digits == 0) {
    error = "a non-negative number expected";
    return false;
  }
  const std::string unit = lower(trim(text.substr(position)));
  std::uint64_t multiplier = 1;
  if (!unit.empty()) {
    bool known = false;
    for (const size_unit& candidate : size_units) {
      if (candidate.name == unit) {
        multiplier = candidate.multiplier;
        known = true;
      }
    }
    if (!known) {
      error = "unknown unit; use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB";
      return false;
    }
  }
  if (multiplier != 0 && whole > unlimited_bytes / multiplier) {
    error = "number too large";
    return false;
  }
  std::uint64_t result = whole * multiplier;
  if (fraction_numerator != 0) {
    // fraction * multiplier without overflow: multiplier <= 2^40 and numerator < 10^18,
    // so split the multiplier into quotient and remainder by the denominator.
    const wide_unsigned part = static_cast<wide_unsigned>(fraction_numerator) * multiplier / fraction_denominator;
    if (part > unlimited_bytes - result) {
      error = "number too large";
      return false;
    }
    result += static_cast<std::uint64_t>(part);
  }
  bytes = result;
  return true;
}

std::string format_size_bytes(std::uint64_t bytes) {
  if (bytes == unlimited_bytes) return "unlimited";
  static constexpr std::array<std::string_view, 5> names{"B", "KiB", "MiB", "GiB", "TiB"};
  std::size_t unit = 0;
  std::uint64_t value = bytes;
  while (value != 0 && value % 1024 == 0 && unit + 1 < names.size()) {
    value /= 1024;
    ++unit;
  }
  return std::to_string(value) + std::string(names[unit]);
}

std::string format_bytes_readable(double bytes) {
  static constexpr std::array<const char*, 5> names{"KiB", "MiB", "GiB", "TiB", "PiB"};
  char text[64];
  if (!(std::fabs(bytes) >= 1024.0)) {
    std::snprintf(text, sizeof text, "%.0f bytes", bytes);
    return text;
  }
  double value = bytes / 1024.0;
  std::size_t unit = 0;
  while (std::fabs(value) >= 1024.0 && unit + 1 < names.size()) {
    value /= 1024.0;
    ++unit;
  }
  std::snprintf(text, sizeof text, "%.2f %s", value, names[unit]);
  return text;
}

}  // namespace fragless
