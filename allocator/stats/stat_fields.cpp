// The generic views of device_stats generated from stats_fields.def: the field table,
// the flat key/value list, resets, derived figures. Invariant: every loop over stats is
// an expansion of stats_fields.def, so a new field appears everywhere at once.
#include <cmath>
#include <string>

#include "fragless/stats.hpp"

namespace fragless {
namespace {

constexpr std::array<std::string_view, 4> stat_part_names{"current", "peak", "allocated", "freed"};

std::int64_t& part(stat& s, std::size_t index) noexcept {
  switch (index) {
    case 0: return s.current;
    case 1: return s.peak;
    case 2: return s.allocated;
    default: return s.freed;
  }
}
std::int64_t part(const stat& s, std::size_t index) noexcept { return part(const_cast<stat&>(s), index); }

void push_integer(std::vector<stat_value>& out, std::string key, stat_unit unit, std::int64_t value) {
  out.push_back(stat_value{std::move(key), unit, true, value, static_cast<double>(value)});
}

void push_stat(std::vector<stat_value>& out, const std::string& prefix, stat_unit unit, const stat& s) {
  for (std::size_t index = 0; index < stat_part_names.size(); ++index)
    push_integer(out, prefix + std::string(stat_part_names[index]), unit, part(s, index));
}

// "name.rest" -> rest, when key starts with name + '.'.
bool strip_prefix(std::string_view& key, std::string_view name) noexcept {
  if (key.size() <= name.size() || key.substr(0, name.size()) != name || key[name.size()] != '.') return false;
  key.remove_prefix(name.size() + 1);
  return true;
}

std::int64_t* find_part(stat& s, std::string_view rest) noexcept {
  for (std::size_t index = 0; index < stat_part_names.size(); ++index)
    if (rest == stat_part_names[index]) return &part(s, index);
  return nullptr;
}

std::int64_t* find_pool_part(pool_stat& group, std::string_view rest) noexcept {
  for (std::size_t pool = 0; pool < pool_names.size(); ++pool) {
    std::string_view tail = rest;
    if (strip_prefix(tail, pool_names[pool])) return find_part(group[pool], tail);
  }
  return nullptr;
}

// The stored int64 a flat key names, or nullptr.
std::int64_t* find_stored(device_stats& stats, std::string_view key) noexcept {
  std::string_view rest = key;
#define FRAGLESS_STAT_GROUP(name, unit, description) \
  rest = key;                                        \
  if (strip_prefix(rest, #name)) return find_pool_part(stats.name, rest);
#define FRAGLESS_STAT_SINGLE(name, unit, description) \
  rest = key;                                         \
  if (strip_prefix(rest, #name)) return find_part(stats.name, rest);
#define FRAGLESS_STAT_COUNTER(name, unit, description) \
  if (key == #name) return &stats.name;
#define FRAGLESS_STAT_GAUGE(name, unit, description) \
  if (key == #name) return &stats.name;
#include "fragless/stats_fields.def"
  return nullptr;
}

}  // namespace

void device_stats::reset_peak() noexcept {
#define FRAGLESS_STAT_GROUP(name, unit, description) \
  for (stat & s : name) s.reset_peak();
#define FRAGLESS_STAT_SINGLE(name, unit, description) name.reset_peak();
#include "fragless/stats_fields.def"
}

void device_stats::reset_accumulated() noexcept {
#define FRAGLESS_STAT_GROUP(name, unit, description) \
  for (stat & s : name) s.reset_accumulated();
#define FRAGLESS_STAT_SINGLE(name, unit, description) name.reset_accumulated();
#define FRAGLESS_STAT_COUNTER(name, unit, description) name = 0;
#include "fragless/stats_fields.def"
}

// Note [Summed stats]: a device's figures over several caches (its own and its private
// pools'). Counts, bytes and counters add; gauges are settings or maxima, so they take the
// larger value. A summed peak is the sum of each cache's peak: an upper bound of the
// device's true peak (the caches need not have peaked at the same moment).
void accumulate(device_stats& total, const device_stats& part) noexcept {
  const auto add = [](stat& to, const stat& from) {
    to.current += from.current;
    to.peak += from.peak;
    to.allocated += from.allocated;
    to.freed += from.freed;
  };
#define FRAGLESS_STAT_GROUP(name, unit, description) \
  for (std::size_t pool = 0; pool < total.name.size(); ++pool) add(total.name[pool], part.name[pool]);
#define FRAGLESS_STAT_SINGLE(name, unit, description) add(total.name, part.name);
#define FRAGLESS_STAT_COUNTER(name, unit, description) total.name += part.name;
#define FRAGLESS_STAT_GAUGE(name, unit, description) total.name = std::max(total.name, part.name);
#include "fragless/stats_fields.def"
}

double stat_unused_reserved_bytes(const device_stats& stats) noexcept {
  // In double: arbitrary (e.g. corrupt or test) values must not overflow int64.
  return static_cast<double>(stats.reserved_bytes[pool_all].current) -
         static_cast<double>(stats.allocated_bytes[pool_all].current);
}

double stat_fragmentation(const device_stats& stats) noexcept {
  const double unused = stat_unused_reserved_bytes(stats);
  if (unused <= 0) return 0.0;
  const double largest = static_cast<double>(stats.largest_free_block_bytes);
  return std::clamp(1.0 - largest / unused, 0.0, 1.0);
}

std::string_view to_string(stat_unit unit) noexcept {
  switch (unit) {
    case stat_unit::count: return "count";
    case stat_unit::bytes: return "bytes";
    case stat_unit::nanoseconds: return "nanoseconds";
    case stat_unit::ratio: return "ratio";
  }
  return "count";
}

std::span<const stat_field> stat_fields() noexcept {
  static constexpr stat_field fields[] = {
#define FRAGLESS_STAT_GROUP(name, unit, description) {#name, stat_field_kind::group, stat_unit::unit, description},
#define FRAGLESS_STAT_SINGLE(name, unit, description) {#name, stat_field_kind::single, stat_unit::unit, description},
#define FRAGLESS_STAT_COUNTER(name, unit, description) {#name, stat_field_kind::counter, stat_unit::unit, description},
#define FRAGLESS_STAT_GAUGE(name, unit, description) {#name, stat_field_kind::gauge, stat_unit::unit, description},
#define FRAGLESS_STAT_DERIVED(name, unit, description, function) \
  {#name, stat_field_kind::derived, stat_unit::unit, description},
#include "fragless/stats_fields.def"
  };
  return fields;
}

std::vector<stat_value> flatten(const device_stats& stats) {
  std::vector<stat_value> out;
  out.reserve(160);
#define FRAGLESS_STAT_GROUP(name, unit, description) \
  for (std::size_t pool = 0; pool < pool_names.size(); ++pool) \
    push_stat(out, std::string(#name ".") + std::string(pool_names[pool]) + ".", stat_unit::unit, stats.name[pool]);
#define FRAGLESS_STAT_SINGLE(name, unit, description) push_stat(out, #name ".", stat_unit::unit, stats.name);
#define FRAGLESS_STAT_COUNTER(name, unit, description) push_integer(out, #name, stat_unit::unit, stats.name);
#define FRAGLESS_STAT_GAUGE(name, unit, description) push_integer(out, #name, stat_unit::unit, stats.name);
#define FRAGLESS_STAT_DERIVED(name, unit, description, function)                                         \
  {                                                                                                        \
    const double value = function(stats);                                                                \
    if (stat_unit::unit == stat_unit::ratio)                                                              \
      out.push_back(stat_value{#name, stat_unit::unit, false, 0, value});                                 \
    else                                                                                                   \
      push_integer(out, #name, stat_unit::unit, static_cast<std::int64_t>(std::llround(std::clamp(value, -9.2e18, 9.2e18)))); \
  }
#include "fragless/stats_fields.def"
  return out;
}

bool set_flat_value(device_stats& stats, std::string_view key, std::int64_t value) noexcept {
  std::int64_t* stored = find_stored(stats, key);
  if (stored == nullptr) return false;
  *stored = value;
  return true;
}

std::optional<double> flat_value(const device_stats& stats, std::string_view key) {
  device_stats& mutable_stats = const_cast<device_stats&>(stats);
  if (const std::int64_t* stored = find_stored(mutable_stats, key)) return static_cast<double>(*stored);
#define FRAGLESS_STAT_DERIVED(name, unit, description, function) \
  if (key == #name) return function(stats);
#include "fragless/stats_fields.def"
  return std::nullopt;
}

}  // namespace fragless
