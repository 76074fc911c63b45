// Parsing of simcuda's environment variables; see env_parse.h.
#include "env_parse.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>

namespace simcuda {

std::optional<uint64_t> parse_unsigned(std::string_view text) {
  uint64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

std::optional<uint64_t> parse_bytes(std::string_view text) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  auto number = parse_unsigned(text.substr(0, digits));
  if (!number) return std::nullopt;
  std::string_view suffix = text.substr(digits);
  unsigned shift = 0;
  if (suffix.empty() || suffix == "B") shift = 0;
  else if (suffix == "K" || suffix == "KB" || suffix == "KiB") shift = 10;
  else if (suffix == "M" || suffix == "MB" || suffix == "MiB") shift = 20;
  else if (suffix == "G" || suffix == "GB" || suffix == "GiB") shift = 30;
  else if (suffix == "T" || suffix == "TB" || suffix == "TiB") shift = 40;
  else return std::nullopt;
  if (shift != 0 && *number > (UINT64_MAX >> shift)) return std::nullopt;
  return *number << shift;
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> pieces;
  while (!text.empty()) {
    size_t at = text.find(separator);
    std::string_view piece = text.substr(0, at);
    if (!piece.empty()) pieces.push_back(piece);
    if (at == std::string_view::npos) break;
    text.remove_prefix(at + 1);
  }
  return pieces;
}

std::optional<std::string> env_string(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

void warn(const std::string& message) { std::fprintf(stderr, "simcuda: warning: %s\n", message.c_str()); }

}  // namespace simcuda
