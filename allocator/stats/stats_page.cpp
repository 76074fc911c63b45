// Seqlock writes and reads of a stats page slot, Note [Stats page seqlock] in
// stats_page.hpp. Invariant: read_slot returns only copies taken while no write was in
// progress and none completed meanwhile.
#include "stats_page.hpp"

#include <cstring>
#include <ctime>
#include <thread>

namespace fragless::stats_page {

std::uint64_t layout_hash() {
  std::uint64_t hash = 14695981039346656037ull;
  for (const stat_value& v : flatten(device_stats{})) {
    for (char c : v.key) {
      hash ^= static_cast<unsigned char>(c);
      hash *= 1099511628211ull;
    }
    hash ^= 0xff;
    hash *= 1099511628211ull;
  }
  return hash;
}

void write_slot(device_slot& s, const device_stats& stats) noexcept {
  std::int64_t raw[value_count];
  std::memcpy(raw, &stats, sizeof raw);
  std::uint64_t sequence = s.sequence.load(std::memory_order_relaxed);
  // Make the sequence odd; another writer of this slot holds it odd for a few hundred
  // nanoseconds at most.
  while (true) {
    if (sequence % 2 == 0 &&
        s.sequence.compare_exchange_weak(sequence, sequence + 1, std::memory_order_acquire, std::memory_order_relaxed))
      break;
    if (sequence % 2 != 0) {
      std::this_thread::yield();
      sequence = s.sequence.load(std::memory_order_relaxed);
    }
  }
  std::atomic_thread_fence(std::memory_order_release);
  for (std::size_t i = 0; i < value_count; ++i) s.values[i].store(raw[i], std::memory_order_relaxed);
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);  // vDSO: no system call
  s.published_ns.store(static_cast<std::int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec, std::memory_order_relaxed);
  s.sequence.store(sequence + 2, std::memory_order_release);
}

bool read_slot(const device_slot& s, device_stats& stats, std::int64_t& published_ns, int max_attempts) noexcept {
  std::int64_t raw[value_count];
  for (int attempt = 0; attempt < max_attempts; ++attempt) {
    const std::uint64_t before = s.sequence.load(std::memory_order_acquire);
    if (before == 0) return false;
    if (before % 2 != 0) {
      std::this_thread::yield();
      continue;
    }
    for (std::size_t i = 0; i < value_count; ++i) raw[i] = s.values[i].load(std::memory_order_relaxed);
    const std::int64_t when = s.published_ns.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.sequence.load(std::memory_order_relaxed) == before) {
      std::memcpy(&stats, raw, sizeof raw);
      published_ns = when;
      return true;
    }
  }
  return false;
}

bool is_safe_file_name(std::string_view name) noexcept {
  if (name.empty() || name.size() >= request_name_bytes || name.front() == '.') return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
                    c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace fragless::stats_page
