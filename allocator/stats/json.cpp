// JSON reading and writing for fragless documents. See json.hpp for the invariants.
#include "json.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace fragless::json {

value value::make_bool(bool flag) {
  value v;
  v.type_ = type::boolean;
  v.boolean_ = flag;
  return v;
}
value value::make_integer(std::int64_t number) {
  value v;
  v.type_ = type::integer;
  v.integer_ = number;
  return v;
}
value value::make_real(double number) {
  value v;
  v.type_ = type::real;
  v.real_ = number;
  return v;
}
value value::make_string(std::string text) {
  value v;
  v.type_ = type::string;
  v.text_ = std::move(text);
  return v;
}
value value::make_array() {
  value v;
  v.type_ = type::array;
  return v;
}
value value::make_object() {
  value v;
  v.type_ = type::object;
  return v;
}

std::int64_t value::as_integer() const noexcept {
  if (type_ == type::integer) return integer_;
  if (type_ == type::real && std::isfinite(real_) && std::fabs(real_) < 9.2e18) return static_cast<std::int64_t>(real_);
  return 0;
}
double value::as_real() const noexcept { return type_ == type::integer ? static_cast<double>(integer_) : real_; }

const value* value::find(std::string_view key) const noexcept {
  if (type_ != type::object) return nullptr;
  for (const auto& [name, member] : members_)
    if (name == key) return &member;
  return nullptr;
}

value& value::push(value item) {
  items_.push_back(std::move(item));
  return items_.back();
}
value& value::set(std::string key, value item) {
  for (auto& [name, member] : members_)
    if (name == key) return member = std::move(item);
  members_.emplace_back(std::move(key), std::move(item));
  return members_.back().second;
}

namespace {

constexpr int max_depth = 256;

class reader {
 public:
  explicit reader(std::string_view text) : text_(text) {}

  bool document(value& out, std::string& error) {
    skip_space();
    if (!parse_value(out, 0)) return fail_out(error);
    skip_space();
    if (position_ != text_.size()) {
      message_ = "unexpected text after the document";
      return fail_out(error);
    }
    return true;
  }

 private:
  bool fail_out(std::string& error) {
    error = "offset " + std::to_string(position_) + ": " + message_;
    return false;
  }
  bool fail(const char* what) {
    message_ = what;
    return false;
  }
  void skip_space() {
    while (position_ < text_.size() &&
           (text_[position_] == ' ' || text_[position_] == '\t' || text_[position_] == '\n' || text_[position_] == '\r'))
      ++position_;
  }
  bool literal(std::string_view word) {
    if (text_.substr(position_, word.size()) != word) return fail("unknown literal");
    position_ += word.size();
    return true;
  }

  bool parse_value(value& out, int depth) {
    if (depth > max_depth) return fail("nesting too deep");
    if (position_ >= text_.size()) return fail("unexpected end of input");
    const char c = text_[position_];
    if (c == '{') return parse_object(out, depth);
    if (c == '[') return parse_array(out, depth);
    if (c == '"') {
      std::string text;
      if (!parse_string(text)) return false;
      out = value::make_string(std::move(text));
      return true;
    }
    if (c == 't') {
      out = value::make_bool(true);
      return literal("true");
    }
    if (c == 'f') {
      out = value::make_bool(false);
      return literal("false");
    }
    if (c == 'n') {
      out = value{};
      return literal("null");
    }
    return parse_number(out);
  }

  // The members of an object or the items of an array, from its opening bracket: each read
  // by `parse_item()`, separated by ',' up to `closer`. The messages name the container.
  template <typename ParseItem>
  bool parse_items(char closer, ParseItem&& parse_item) {
    const bool object = closer == '}';
    ++position_;
    skip_space();
    if (position_ < text_.size() && text_[position_] == closer) {
      ++position_;
      return true;
    }
    while (true) {
      skip_space();
      if (!parse_item()) return false;
      skip_space();
      if (position_ >= text_.size()) return fail(object ? "unexpected end of input in object" : "unexpected end of input in array");
      if (text_[position_] == ',') {
        ++position_;
        continue;
      }
      if (text_[position_] == closer) {
        ++position_;
        return true;
      }
      return fail(object ? "',' or '}' expected" : "',' or ']' expected");
    }
  }

  bool parse_object(value& out, int depth) {
    out = value::make_object();
    return parse_items('}', [&] {
      if (position_ >= text_.size() || text_[position_] != '"') return fail("object key expected");
      std::string key;
      if (!parse_string(key)) return false;
      skip_space();
      if (position_ >= text_.size() || text_[position_] != ':') return fail("':' expected");
      ++position_;
      skip_space();
      value member;
      if (!parse_value(member, depth + 1)) return false;
      out.set(std::move(key), std::move(member));
      return true;
    });
  }

  bool parse_array(value& out, int depth) {
    out = value::make_array();
    return parse_items(']', [&] {
      value item;
      if (!parse_value(item, depth + 1)) return false;
      out.push(std::move(item));
      return true;
    });
  }

  bool hex4(std::uint32_t& code) {
    if (text_.size() - position_ < 4) return fail("short \\u escape");
    code = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = text_[position_++];
      code <<= 4;
      if (h >= '0' && h <= '9') code |= static_cast<std::uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f') code |= static_cast<std::uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') code |= static_cast<std::uint32_t>(h - 'A' + 10);
      else return fail("bad \\u escape");
    }
    return true;
  }

  static void append_utf8(std::string& out, std::uint32_t code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  bool parse_string(std::string& out) {
    ++position_;  // opening quote
    while (true) {
      if (position_ >= text_.size()) return fail("unterminated string");
      const char c = text_[position_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return fail("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (position_ >= text_.size()) return fail("unterminated escape");
      const char e = text_[position_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          std::uint32_t code = 0;
          if (!hex4(code)) return false;
          if (code >= 0xD800 && code < 0xDC00) {
            std::uint32_t low = 0;
            if (text_.substr(position_, 2) != "\\u") return fail("lone surrogate");
            position_ += 2;
            if (!hex4(low)) return false;
            if (low < 0xDC00 || low >= 0xE000) return fail("bad surrogate pair");
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
          } else if (code >= 0xDC00 && code < 0xE000) {
            return fail("lone surrogate");
          }
          append_utf8(out, code);
          break;
        }
        default: return fail("unknown escape");
      }
    }
  }

  bool parse_number(value& out) {
    const std::size_t start = position_;
    bool is_integer = true;
    if (position_ < text_.size() && text_[position_] == '-') ++position_;
    const std::size_t digits_start = position_;
    while (position_ < text_.size() && text_[position_] >= '0' && text_[position_] <= '9') ++position_;
    if (position_ == digits_start) return fail("value expected");
    if (text_[digits_start] == '0' && position_ - digits_start > 1) return fail("leading zero");
    if (position_ < text_.size() && text_[position_] == '.') {
      is_integer = false;
      ++position_;
      const std::size_t fraction_start = position_;
      while (position_ < text_.size() && text_[position_] >= '0' && text_[position_] <= '9') ++position_;
      if (position_ == fraction_start) return fail("digits expected after '.'");
    }
    if (position_ < text_.size() && (text_[position_] == 'e' || text_[position_] == 'E')) {
      is_integer = false;
      ++position_;
      if (position_ < text_.size() && (text_[position_] == '+' || text_[position_] == '-')) ++position_;
      const std::size_t exponent_start = position_;
      while (position_ < text_.size() && text_[position_] >= '0' && text_[position_] <= '9') ++position_;
      if (position_ == exponent_start) return fail("digits expected in exponent");
    }
    const char* first = text_.data() + start;
    const char* last = text_.data() + position_;
    if (is_integer) {
      std::int64_t number = 0;
      const auto [end, code] = std::from_chars(first, last, number);
      if (code == std::errc{} && end == last) {
        out = value::make_integer(number);
        return true;
      }
    }
    double real = 0;
    const auto [end, code] = std::from_chars(first, last, real);
    if (code != std::errc{} || end != last) return fail("number out of range");
    out = value::make_real(real);
    return true;
  }

  std::string_view text_;
  std::size_t position_ = 0;
  const char* message_ = "";
};

void write_value(std::string& out, const value& v, bool indent, int depth) {
  const auto newline = [&](int level) {
    if (!indent) return;
    out += '\n';
    out.append(static_cast<std::size_t>(level) * 2, ' ');
  };
  switch (v.kind()) {
    case value::type::null: out += "null"; break;
    case value::type::boolean: out += v.as_bool() ? "true" : "false"; break;
    case value::type::integer: out += std::to_string(v.as_integer()); break;
    case value::type::real: {
      if (!std::isfinite(v.as_real())) {
        out += "null";
        break;
      }
      char buffer[64];
      const auto [end, code] = std::to_chars(buffer, buffer + sizeof buffer, v.as_real());
      std::string_view text(buffer, code == std::errc{} ? static_cast<std::size_t>(end - buffer) : 0);
      out += text;
      // Keep reals recognisable as reals when read back.
      if (text.find_first_of(".eE") == std::string_view::npos) out += ".0";
      break;
    }
    case value::type::string: out += quote(v.as_string()); break;
    case value::type::array: {
      if (v.items().empty()) {
        out += "[]";
        break;
      }
      out += '[';
      bool first = true;
      for (const value& item : v.items()) {
        if (!first) out += ',';
        first = false;
        newline(depth + 1);
        write_value(out, item, indent, depth + 1);
      }
      newline(depth);
      out += ']';
      break;
    }
    case value::type::object: {
      if (v.members().empty()) {
        out += "{}";
        break;
      }
      out += '{';
      bool first = true;
      for (const auto& [key, member] : v.members()) {
        if (!first) out += ',';
        first = false;
        newline(depth + 1);
        out += quote(key);
        out += indent ? ": " : ":";
        write_value(out, member, indent, depth + 1);
      }
      newline(depth);
      out += '}';
      break;
    }
  }
}

}  // namespace

bool parse(std::string_view text, value& out, std::string& error) {
  reader parser(text);
  value result;
  if (!parser.document(result, error)) return false;
  out = std::move(result);
  return true;
}

std::string write(const value& root, bool indent) {
  std::string out;
  write_value(out, root, indent, 0);
  if (indent) out += '\n';
  return out;
}

std::string quote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += escaped;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

}  // namespace fragless::json
