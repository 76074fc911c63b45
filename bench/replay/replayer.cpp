// replayer: see header and Note [Replay timing].
#include "replayer.hpp"

#include "live_block_checker.hpp"

#include <algorithm>
#include <chrono>
#include <unordered_map>
#include <utility>

namespace fragless::bench {

namespace {

using clock_type = std::chrono::steady_clock;

struct live_entry {
  void* pointer;
  std::uint64_t size_bytes;
  stream_handle stream;
};

// Keeps at most ~2 * target points while preserving the highest reserved/live values of
// each bucket, so the plotted peaks are the real ones.
class timeline_sampler {
public:
  timeline_sampler(std::size_t total_events, std::size_t target_points)
      : bucket_events_(std::max<std::size_t>(1, total_events / std::max<std::size_t>(1, target_points))) {}
  void add(std::size_t event, std::uint64_t live, std::uint64_t reserved) {
    const std::size_t bucket = event / bucket_events_;
    if (!points_.empty() && current_bucket_ == bucket) {
      timeline_point& last = points_.back();
      last.live_bytes = std::max(last.live_bytes, live);
      last.reserved_bytes = std::max(last.reserved_bytes, reserved);
      return;
    }
    current_bucket_ = bucket;
    points_.push_back(timeline_point{event, live, reserved});
  }
  std::vector<timeline_point> take() { return std::move(points_); }

private:
  std::size_t bucket_events_;
  std::size_t current_bucket_ = 0;
  std::vector<timeline_point> points_;
};

// Note [Host work]
// A program does work between its allocator calls: a training step of 14,000 large-pool
// events issues its kernels over tens of milliseconds, where a replay runs the events back
// to back. --host-work-ns spins that long before each event (outside the timed calls), so
// that what the allocator does beside the program (a loop plan's layout on threads of its
// own, Note [Layout threads]) shows as it would there: in the longest call, not in ns/op.
void do_host_work(std::uint64_t ns) noexcept {
  const auto until = clock_type::now() + std::chrono::nanoseconds(ns);
  while (clock_type::now() < until) {
  }
}

// Note [Frees at a pass's end]
// The blocks a trace leaves live are freed after each pass (Note [Steady state]), timed for
// the longest call only: ns/op counts the trace's own events. A loop plan whose step is a
// whole pass is found where the pass ends -- in one of these frees, where the trace leaves
// blocks live -- and is laid out there, on this thread (Note [Layout threads]), so a
// profile of a replay is mostly layouts that ns/op never sees: over 30 corpus
// `many-streams` seeds (five passes) 69 % of the samples inside the allocator's calls, its
// stream-affinity stage alone 38 %, none of it in what ns/op measures. These frees go
// through this function, never inlined, so that a call-graph profile of frame-pointer builds
// can leave out every sample under it (scripts/host_profile.py does).
template <typename F>
[[gnu::noinline]] void free_at_pass_end(F&& free_block) {
  free_block();
  asm volatile("");  // a call, not a tail jump: the frame stays on the stack
}

}  // namespace

replay_outcome replay_trace(const traces::trace& t, replay_allocator& allocator,
                            const std::vector<stream_handle>& streams, const replay_options& options,
                            const device_counters& counters) {
  replay_outcome outcome;
  outcome.counters_available = counters.available();
  const std::size_t event_count =
      options.max_events == 0 ? t.events.size() : std::min(options.max_events, t.events.size());
  outcome.events_replayed = event_count;
  const int repetitions = std::max(1, options.repetitions);
  if (repetitions > 1) outcome.last_calling_pass = 0;
  // Per repetition: host ns per op and the emulation's ns per op (Note [Host time without
  // emulation]); the median repetition by host time gives both figures.
  std::vector<std::pair<double, double>> ns_per_op;
  bool emulation_timed = true;
  for (const char* function : costed_functions()) emulation_timed = counters.time_emulation(function) && emulation_timed;
  // One allocator call, timed alone: its own time, less the time simcuda spent emulating
  // device calls in it, and that emulation; the longest own time of all is kept (Note [Host
  // work]).
  struct call_time {
    std::uint64_t own_ns, emulated_ns;
  };
  auto time_call = [&outcome, &counters](auto&& call) {
    const std::uint64_t emulation_before = counters.thread_emulation_ns();
    const auto start = clock_type::now();
    call();
    const auto elapsed = static_cast<std::uint64_t>((clock_type::now() - start).count());
    const std::uint64_t emulated = counters.thread_emulation_ns() - emulation_before;
    const std::uint64_t ns = elapsed - std::min(elapsed, emulated);
    outcome.longest_op_ns = std::max(outcome.longest_op_ns, ns);
    return call_time{ns, emulated};
  };

  for (int repetition = 0; repetition < repetitions; ++repetition) {
    const bool measuring = repetition == 0;
    const bool last = repetition + 1 == repetitions;
    const device_call_counts calls_before = counters.read();
    std::unordered_map<std::uint64_t, live_entry> live;  // block id -> block
    live.reserve(1024);
    live_block_checker checker;
    timeline_sampler sampler(event_count, options.timeline_points);
    std::uint64_t live_bytes = 0;
    std::uint64_t last_generation = counters.memory_generation();
    std::uint64_t timed_ns = 0;
    std::uint64_t timed_ops = 0;
    std::uint64_t emulation_ns = 0;  // inside the timed calls
    auto count_op = [&](call_time time) {
      timed_ns += time.own_ns;
      emulation_ns += time.emulated_ns;
      ++timed_ops;
    };
    if (measuring) counters.reset();
    if (options.log != nullptr) options.log->start_from(counters);
    // Note [Call log]: a row for the event just replayed, if it called the device.
    auto log_calls = [&](std::size_t event, const char* op, std::uint64_t size_bytes, std::size_t stream_index,
                         std::uint64_t live_after) {
      if (options.log != nullptr && options.log->moved(counters)) {
        options.log->write(repetition + 1, event, op, size_bytes, stream_index, allocator.reserved_bytes(), live_after);
      }
    };
    pass_activity pass;
    for (std::size_t f = 0; f < costed_function_count; ++f) pass.calls[f] = counters.count(costed_functions()[f]);
    std::uint64_t previous_used_bytes = counters.used_bytes();
    auto account_used_bytes = [&](std::uint64_t now) {
      if (now > previous_used_bytes) pass.obtained_bytes += now - previous_used_bytes;
      else pass.returned_bytes += previous_used_bytes - now;
      previous_used_bytes = now;
    };

    for (std::size_t i = 0; i < event_count; ++i) {
      const traces::trace_event& e = t.events[i];
      stream_handle stream = streams.at(e.stream_index);
      if (options.host_work_ns != 0) do_host_work(options.host_work_ns);
      if (e.op == traces::trace_op::alloc) {
        void* pointer = nullptr;
        count_op(time_call([&] { pointer = allocator.allocate(e.size_bytes, stream); }));
        if (pointer == nullptr) {
          log_calls(i, "alloc-failed", e.size_bytes, e.stream_index, live_bytes);
          if (measuring && outcome.ooms++ == 0) {
            outcome.first_failure = "event " + std::to_string(i) + ": " + allocator.last_failure();
          }
          continue;  // its free is skipped below
        }
        if (measuring) {
          std::string conflict;
          if (!checker.insert(reinterpret_cast<std::uintptr_t>(pointer), e.size_bytes, &conflict)) {
            outcome.status = "overlap: event " + std::to_string(i) + ": " + conflict;
            return outcome;
          }
        }
        live.emplace(e.block_id, live_entry{pointer, e.size_bytes, stream});
        live_bytes += e.size_bytes;
      } else {
        auto found = live.find(e.block_id);
        if (found == live.end()) continue;  // its allocation failed (OOM)
        const live_entry block = found->second;
        live.erase(found);
        live_bytes -= block.size_bytes;
        if (measuring) checker.erase(reinterpret_cast<std::uintptr_t>(block.pointer));
        count_op(time_call([&] { allocator.deallocate(block.pointer, block.size_bytes, block.stream); }));
      }
      log_calls(i, e.op == traces::trace_op::alloc ? "alloc" : "free", e.size_bytes, e.stream_index, live_bytes);
      // Note [Peak over the run]
      std::uint64_t reserved = 0;
      const std::uint64_t used_bytes = counters.used_bytes();
      const std::uint64_t generation = counters.memory_generation();  // Note [Memory generation]
      account_used_bytes(used_bytes);
      if (measuring || !counters.available() || generation != last_generation) {
        reserved = allocator.reserved_bytes();
        if (reserved > outcome.peak_reserved_bytes) {
          outcome.peak_reserved_bytes = reserved;
          outcome.reserved_minus_allocated_at_peak_bytes = reserved - std::min(reserved, live_bytes);
        }
        last_generation = generation;
      }
      if (measuring) {
        outcome.peak_live_bytes = std::max(outcome.peak_live_bytes, live_bytes);
        outcome.device_used_peak_bytes = std::max(outcome.device_used_peak_bytes, used_bytes);
        sampler.add(i, live_bytes, reserved);
      }
    }
    if (measuring) {
      outcome.calls = counters.read();
      outcome.timeline = sampler.take();
    }
    // Return what is still live; the cache stays for the next repetition (Note [Steady state]).
    // Not in ns/op nor the emulation figure (the trace never made these calls), but in the
    // longest call: a plan may start at one of them (Note [Host work], Note [Frees at a
    // pass's end]).
    for (auto& [id, block] : live) {
      time_call([&] { free_at_pass_end([&] { allocator.deallocate(block.pointer, block.size_bytes, block.stream); }); });
      live_bytes -= block.size_bytes;
      if (options.log != nullptr) {
        const auto stream_index = static_cast<std::size_t>(
            std::find(streams.begin(), streams.end(), block.stream) - streams.begin());
        log_calls(event_count, "free-at-pass-end", block.size_bytes, stream_index, live_bytes);
      }
    }
    // The first repetition's count restarted at zero (counters.reset() above).
    const std::uint64_t pass_calls = counters.read().total() - (measuring ? 0 : calls_before.total());
    if (last && repetition > 0) outcome.steady_calls = static_cast<std::int64_t>(pass_calls);
    if (repetitions > 1 && pass_calls > 0) outcome.last_calling_pass = repetition + 1;
    if (counters.available()) outcome.calls_by_pass.push_back(pass_calls);
    account_used_bytes(counters.used_bytes());
    pass.host_ns = timed_ns;
    for (std::size_t f = 0; f < costed_function_count; ++f) pass.calls[f] = counters.count(costed_functions()[f]) - pass.calls[f];
    if (measuring) outcome.first_pass = pass;
    if (last && repetition > 0) outcome.steady_pass = pass;
    outcome.host_ns_by_pass.push_back(timed_ops != 0 ? static_cast<double>(timed_ns) / static_cast<double>(timed_ops) : 0.0);
    if (timed_ops != 0)
      ns_per_op.emplace_back(static_cast<double>(timed_ns) / static_cast<double>(timed_ops),
                             static_cast<double>(emulation_ns) / static_cast<double>(timed_ops));
  }
  allocator.release_cached();
  if (!ns_per_op.empty()) {
    std::sort(ns_per_op.begin(), ns_per_op.end());
    const std::size_t n = ns_per_op.size();
    const auto& low = ns_per_op[n % 2 == 1 ? n / 2 : n / 2 - 1];
    const auto& high = ns_per_op[n / 2];
    outcome.host_ns_per_op = (low.first + high.first) / 2.0;
    if (emulation_timed) outcome.emulation_ns_per_op = (low.second + high.second) / 2.0;
  }
  return outcome;
}

}  // namespace fragless::bench
