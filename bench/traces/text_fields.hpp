// text_fields: line splitting and strict number parsing shared by the text readers
// (RMM CSV, lifetime CSV, our text format).
// Invariant: a number parses only if the whole field is a number that fits; anything else
// is a trace_error naming the caller's position.
#pragma once

#include "trace.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fragless::traces {

// Splits on `separator`, trimming spaces, tabs and a trailing '\r' from each field.
std::vector<std::string_view> split_fields(std::string_view line, char separator);

// Decimal (optionally "0x" hex when allow_hex) unsigned integer.
std::uint64_t parse_unsigned(std::string_view field, const std::string& where, bool allow_hex = false);
// Decimal integer that may be negative.
std::int64_t parse_signed(std::string_view field, const std::string& where);

// "0x..." lower-case hexadecimal, for addresses in error messages.
std::string format_hex(std::uint64_t value);

// Iterates lines; `line_number` is 1-based.
class line_reader {
public:
  explicit line_reader(std::string_view text) : text_(text) {}
  bool next(std::string_view& line);
  std::size_t line_number() const { return line_number_; }

private:
  std::string_view text_;
  std::size_t position_ = 0;
  std::size_t line_number_ = 0;
};

}  // namespace fragless::traces
