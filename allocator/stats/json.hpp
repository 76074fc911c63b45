// A small JSON value, reader and writer for fragless's own documents (stats, snapshots,
// the CLI's --json). Internal to fragless_stats and its tools. Invariants: the reader
// never reads past its input, bounds nesting depth, and reports the byte offset of the
// first error; integers that fit in int64 stay exact.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fragless::json {

class value {
 public:
  enum class type : std::uint8_t { null, boolean, integer, real, string, array, object };

  value() = default;
  static value make_bool(bool flag);
  static value make_integer(std::int64_t number);
  static value make_real(double number);
  static value make_string(std::string text);
  static value make_array();
  static value make_object();

  type kind() const noexcept { return type_; }
  bool is_number() const noexcept { return type_ == type::integer || type_ == type::real; }
  bool as_bool() const noexcept { return boolean_; }
  std::int64_t as_integer() const noexcept;  // reals truncated
  double as_real() const noexcept;
  const std::string& as_string() const noexcept { return text_; }
  const std::vector<value>& items() const noexcept { return items_; }
  std::vector<value>& items() noexcept { return items_; }
  // Object members in document order.
  const std::vector<std::pair<std::string, value>>& members() const noexcept { return members_; }
  // Member by key, nullptr when absent or not an object.
  const value* find(std::string_view key) const noexcept;

  value& push(value item);
  value& set(std::string key, value item);

 private:
  type type_ = type::null;
  bool boolean_ = false;
  std::int64_t integer_ = 0;
  double real_ = 0;
  std::string text_;
  std::vector<value> items_;
  std::vector<std::pair<std::string, value>> members_;
};

// Parses one JSON document (surrounding whitespace allowed). On error returns false and
// sets `error` to "offset N: what".
bool parse(std::string_view text, value& out, std::string& error);

// Compact JSON, or indented with two spaces when `indent`.
std::string write(const value& root, bool indent = true);
// A JSON string literal with quotes and escapes.
std::string quote(std::string_view text);

}  // namespace fragless::json
