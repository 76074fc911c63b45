// text_fields: strict parsing helpers (see header).
#include "text_fields.hpp"

namespace fragless::traces {

namespace {
std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}
}  // namespace

std::vector<std::string_view> split_fields(std::string_view line, char separator) {
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = line.find(separator, start);
    if (end == std::string_view::npos) {
      fields.push_back(trim(line.substr(start)));
      return fields;
    }
    fields.push_back(trim(line.substr(start, end - start)));
    start = end + 1;
  }
}

std::uint64_t parse_unsigned(std::string_view field, const std::string& where, bool allow_hex) {
  std::string_view digits = field;
  unsigned base = 10;
  if (allow_hex && digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
    digits.remove_prefix(2);
    base = 16;
  }
  if (digits.empty()) throw trace_error(where + ": expected a number, found '" + std::string(field) + "'");
  std::uint64_t value = 0;
  for (char c : digits) {
    unsigned digit;
    if (c >= '0' && c <= '9') digit = static_cast<unsigned>(c - '0');
    else if (base == 16 && c >= 'a' && c <= 'f') digit = static_cast<unsigned>(c - 'a' + 10);
    else if (base == 16 && c >= 'A' && c <= 'F') digit = static_cast<unsigned>(c - 'A' + 10);
    else throw trace_error(where + ": expected a non-negative number, found '" + std::string(field) + "'");
    if (value > (UINT64_MAX - digit) / base) throw trace_error(where + ": number too large '" + std::string(field) + "'");
    value = value * base + digit;
  }
  return value;
}

std::int64_t parse_signed(std::string_view field, const std::string& where) {
  if (!field.empty() && field.front() == '-') {
    const std::uint64_t magnitude = parse_unsigned(field.substr(1), where);
    if (magnitude > static_cast<std::uint64_t>(INT64_MAX)) throw trace_error(where + ": number too small");
    return -static_cast<std::int64_t>(magnitude);
  }
  const std::uint64_t value = parse_unsigned(field, where);
  if (value > static_cast<std::uint64_t>(INT64_MAX)) throw trace_error(where + ": number too large");
  return static_cast<std::int64_t>(value);
}

bool line_reader::next(std::string_view& line) {
  if (position_ >= text_.size()) return false;
  std::size_t end = text_.find('\n', position_);
  if (end == std::string_view::npos) end = text_.size();
  line = text_.substr(position_, end - position_);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  position_ = end + 1;
  ++line_number_;
  return true;
}

std::string format_hex(std::uint64_t value) {
  static const char digits[] = "0123456789abcdef";
  std::string text;
  do {
    text.insert(text.begin(), digits[value & 15]);
    value >>= 4;
  } while (value != 0);
  return "0x" + text;
}

}  // namespace fragless::traces
