// The options table built from options_fields.def, and its two renderings: --help text
// and the README's Markdown table. Invariant: one row per option_fields.def entry, in
// that order; default texts are what the parser accepts.
#include <deque>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "fragless/options.hpp"

namespace fragless {
namespace {

// Accepted-range texts, computed once from the .def numbers.
std::string size_range_text(std::uint64_t min_bytes, std::uint64_t max_bytes, bool allows_unlimited) {
  std::string text = format_size_bytes(min_bytes) + " .. ";
  text += max_bytes == unlimited_bytes ? std::string("2^64-1 B") : format_size_bytes(max_bytes);
  if (allows_unlimited) text += ", or unlimited";
  return text;
}

struct table_storage {
  // Deques: rows view these strings, so they must not move as rows are added.
  std::deque<std::string> default_texts;
  std::deque<std::string> accepted_texts;
  std::vector<option_info> rows;

  table_storage() {
    const options defaults{};
#define FRAGLESS_OPTION_SIZE(key, default_bytes, min_bytes, max_bytes, allows_unlimited, description) \
  add(#key, option_kind::size, option_value_text(defaults, #key), "bytes",                              \
      size_range_text(min_bytes, max_bytes, allows_unlimited), description);
#define FRAGLESS_OPTION_FRACTION(key, default_value, description)                                     \
  add(#key, option_kind::fraction, option_value_text(defaults, #key), "fraction", "0 < x < 1, or 0 (off)", \
      description);
#define FRAGLESS_OPTION_BOOL(key, default_value, description) \
  add(#key, option_kind::boolean, option_value_text(defaults, #key), "bool", "True, False, true, false, 1, 0", description);
#define FRAGLESS_OPTION_BACKEND(key, default_value, description) \
  add(#key, option_kind::backend, option_value_text(defaults, #key), "enum", "auto, vmm, cudaMalloc", description);
#include "fragless/options_fields.def"
  }

  void add(std::string_view key, option_kind kind, std::string default_text, std::string_view unit,
           std::string accepted, std::string_view description) {
    default_texts.push_back(std::move(default_text));
    accepted_texts.push_back(std::move(accepted));
    rows.push_back(option_info{key, kind, default_texts.back(), unit, accepted_texts.back(), description});
  }
};

const table_storage& storage() {
  static const table_storage table;
  return table;
}

}  // namespace

std::span<const option_info> option_table() noexcept {
  const table_storage& table = storage();
  return {table.rows.data(), table.rows.size()};
}

const option_info* find_option(std::string_view key) noexcept {
  for (const option_info& row : option_table())
    if (row.key == key) return &row;
  return nullptr;
}

void print_options_help(std::ostream& out) {
  out << "FRAGLESS_CONF=\"key:value,key:value,...\" (sizes: see units below)\n\n";
  for (const option_info& row : option_table()) {
    out << "  " << row.key << " (" << row.unit << ", default " << row.default_text << ")\n";
    out << "      " << row.description << ".\n";
    out << "      Accepted: " << row.accepted << ".\n";
  }
  out << "\nSize units: B; KiB, MiB, GiB, TiB (powers of 1024); KB, MB, GB, TB (powers of 1000);\n"
         "a plain number is bytes. Log level: FRAGLESS_LOG_LEVEL (not a FRAGLESS_CONF key).\n";
}

std::string options_markdown_table() {
  std::ostringstream out;
  out << "| Key | Type | Default | Accepted | Description |\n";
  out << "|---|---|---|---|---|\n";
  for (const option_info& row : option_table()) {
    out << "| `" << row.key << "` | " << row.unit << " | `" << row.default_text << "` | " << row.accepted << " | "
        << row.description << " |\n";
  }
  return out.str();
}

}  // namespace fragless
