// fragless stats: the per-device counters (generated from stats_fields.def), the update
// helpers the allocator calls on its hot paths, and the generic views (field table,
// flat key/value list) that memory_summary, the JSON and fragless-stats share.
// Invariants: for every stat, current == allocated - freed until reset_accumulated, and
// peak >= current; for every pool_stat, all == small_pool + large_pool.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fragless {

// One counter in PyTorch's sense. Hot path: increase/decrease are a few plain adds; the
// caller holds the lock that guards the device's stats.
struct stat {
  std::int64_t current = 0;
  std::int64_t peak = 0;
  std::int64_t allocated = 0;
  std::int64_t freed = 0;

  void increase(std::int64_t amount) noexcept {
    current += amount;
    allocated += amount;
    peak = std::max(peak, current);
  }
  void decrease(std::int64_t amount) noexcept {
    current -= amount;
    freed += amount;
  }
  void reset_peak() noexcept { peak = current; }
  void reset_accumulated() noexcept {
    allocated = 0;
    freed = 0;
  }
  friend bool operator==(const stat&, const stat&) = default;
};

// Index into a pool_stat, PyTorch's StatType order.
enum pool_kind : std::size_t { pool_all = 0, pool_small = 1, pool_large = 2 };
using pool_stat = std::array<stat, 3>;
inline constexpr std::array<std::string_view, 3> pool_names{"all", "small_pool", "large_pool"};

// Hot path: adds `amount` (negative: subtracts) to the pool's stat and to "all".
inline void update(pool_stat& s, pool_kind pool, std::int64_t amount) noexcept {
  if (amount >= 0) {
    s[pool_all].increase(amount);
    if (pool != pool_all) s[pool].increase(amount);
  } else {
    s[pool_all].decrease(-amount);
    if (pool != pool_all) s[pool].decrease(-amount);
  }
}
inline void update(stat& s, std::int64_t amount) noexcept {
  if (amount >= 0) s.increase(amount);
  else s.decrease(-amount);
}

// Every stat of one device. Plain data: copyable, comparable, no pointers (it is copied
// verbatim into the shared-memory stats page).
struct device_stats {
#define FRAGLESS_STAT_GROUP(name, unit, description) pool_stat name{};
#define FRAGLESS_STAT_SINGLE(name, unit, description) stat name{};
#define FRAGLESS_STAT_COUNTER(name, unit, description) std::int64_t name = 0;
#define FRAGLESS_STAT_GAUGE(name, unit, description) std::int64_t name = 0;
#include "fragless/stats_fields.def"

  // peak = current for every stat (torch.cuda.reset_peak_memory_stats).
  void reset_peak() noexcept;
  // allocated = freed = 0 for every stat, and every counter to 0
  // (torch.cuda.reset_accumulated_memory_stats).
  void reset_accumulated() noexcept;
  friend bool operator==(const device_stats&, const device_stats&) = default;
};

// Adds `part` (another cache of the same device) into `total` (Note [Summed stats]).
void accumulate(device_stats& total, const device_stats& part) noexcept;

// The derived figures named in stats_fields.def.
double stat_unused_reserved_bytes(const device_stats& stats) noexcept;
double stat_fragmentation(const device_stats& stats) noexcept;

// ---- generic views, generated from the field list ------------------------------------
enum class stat_field_kind : std::uint8_t { group, single, counter, gauge, derived };
enum class stat_unit : std::uint8_t { count, bytes, nanoseconds, ratio };
std::string_view to_string(stat_unit unit) noexcept;

struct stat_field {
  std::string_view name;
  stat_field_kind kind;
  stat_unit unit;
  std::string_view description;
};
// Every field in stats_fields.def order.
std::span<const stat_field> stat_fields() noexcept;

// One flat value: key as in torch.cuda.memory_stats() ("allocated_bytes.all.current").
struct stat_value {
  std::string key;
  stat_unit unit;
  bool is_integer;    // false only for ratio-valued derived figures
  std::int64_t integer;
  double real;        // == integer when is_integer
};
// Every value of `stats`, in field-list order (groups: pools all, small_pool, large_pool,
// each current, peak, allocated, freed).
std::vector<stat_value> flatten(const device_stats& stats);
// Sets a stored value by flat key; false for unknown or derived keys.
bool set_flat_value(device_stats& stats, std::string_view key, std::int64_t value) noexcept;
// A value by flat key (derived ones included); nullopt for unknown keys.
std::optional<double> flat_value(const device_stats& stats, std::string_view key);

// ---- renderings -----------------------------------------------------------------------
// The torch.cuda.memory_summary() table (same layout, fragless title), followed by a
// fragless section (fragmentation, map/unmap, events). abbreviated drops the per-pool rows.
std::string memory_summary(const device_stats& stats, int device, bool abbreviated = false);

// Note [Stats JSON]
// {"schema": "fragless.stats/1", "device": N, "stats": {"<flat key>": number, ...}}
// Keys: every flatten() key (PyTorch's memory_stats() names for the PyTorch part). Integers
// are written as JSON integers, ratios as decimals. Readers ignore unknown keys and keep 0
// for missing ones, so adding a field is compatible; renaming one bumps the schema.
inline constexpr std::string_view stats_json_schema = "fragless.stats/1";
std::string to_json(const device_stats& stats, int device);
// Parses to_json's output (or just its "stats" object). Returns false (and `error`) for
// malformed JSON or a different schema major.
bool stats_from_json(std::string_view json, device_stats& stats, int& device, std::string& error);

}  // namespace fragless
