// The call registry and the common prologue every entry point runs; see call_registry.h.
//
// Note [One prologue]
// Every exported runtime and driver function starts with SIMCUDA_ENTER (entry_scope.h),
// which calls simcuda_core_enter. That single place counts the call, applies injected
// faults (control API and SIMCUDA_FAIL) and busy-waits the modelled cost
// (simcuda_set_cost_ns and SIMCUDA_COST_NS), and logs the call when SIMCUDA_LOG=1.
// Calls nested inside another entry point (the runtime implementing cudaMalloc with the
// driver's cuMemAlloc_v2) are neither counted nor failed: a test that fails "cudaMalloc"
// sees exactly the calls its program made. It also times the top-level calls of the
// functions a benchmark asked to time (Note [Emulation time]).
#include "call_registry.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core_abi.h"
#include "env_parse.h"

namespace simcuda::calls {
namespace {

const char* const kNames[] = {
#define SIMCUDA_RUNTIME_EXPORT(name) #name,
#include "../runtime/runtime_exports.def"
#undef SIMCUDA_RUNTIME_EXPORT
#define SIMCUDA_DRIVER_EXPORT(name) #name,
#include "../driver/driver_exports.def"
#undef SIMCUDA_DRIVER_EXPORT
#define SIMCUDA_NVML_EXPORT(name) #name,
#include "../nvml/nvml_exports.def"
#undef SIMCUDA_NVML_EXPORT
};
constexpr int kNameCount = static_cast<int>(sizeof(kNames) / sizeof(kNames[0]));

struct Fault {
  uint64_t call_number;  // fails when the call counter reaches this (1-based)
  int error_code;
  bool from_nth;         // and every later call
};

struct Slot {
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> cost_ns{0};
  std::atomic<bool> timed{false};  // Note [Emulation time]
  std::atomic<bool> has_faults{false};
  std::vector<Fault> faults;  // guarded by Registry::fault_mutex
};

struct Registry {
  std::unordered_map<std::string_view, int> index_by_name;
  std::unique_ptr<Slot[]> slots{new Slot[kNameCount]};
  std::mutex fault_mutex;
  std::mutex log_mutex;
  std::unordered_set<std::string> logged_unsupported;
  bool log_calls = false;

  Registry() {
    for (int i = 0; i < kNameCount; ++i) index_by_name.emplace(kNames[i], i);
    log_calls = env_string("SIMCUDA_LOG").value_or("0") != "0";
  }
};

Registry& registry();

// Applies SIMCUDA_FAIL="name:nth[+]:code,..." and SIMCUDA_COST_NS="name:ns,...".
void apply_environment(Registry& self) {
  if (auto spec = env_string("SIMCUDA_FAIL")) {
    for (std::string_view item : split(*spec, ',')) {
      auto parts = split(item, ':');
      bool from_nth = parts.size() == 3 && !parts[1].empty() && parts[1].back() == '+';
      std::string_view nth_text = parts.size() == 3 ? parts[1] : std::string_view();
      if (from_nth) nth_text.remove_suffix(1);
      auto nth = parse_unsigned(nth_text);
      auto code = parts.size() == 3 ? parse_unsigned(parts[2]) : std::nullopt;
      auto found = parts.empty() ? self.index_by_name.end() : self.index_by_name.find(parts[0]);
      if (parts.size() != 3 || !nth || *nth == 0 || !code || found == self.index_by_name.end()) {
        warn("ignoring SIMCUDA_FAIL item '" + std::string(item) + "' (want name:nth[+]:code)");
        continue;
      }
      self.slots[found->second].faults.push_back({*nth, static_cast<int>(*code), from_nth});
      self.slots[found->second].has_faults = true;
    }
  }
  if (auto spec = env_string("SIMCUDA_COST_NS")) {
    for (std::string_view item : split(*spec, ',')) {
      auto parts = split(item, ':');
      auto nanoseconds = parts.size() == 2 ? parse_unsigned(parts[1]) : std::nullopt;
      auto found = parts.empty() ? self.index_by_name.end() : self.index_by_name.find(parts[0]);
      if (!nanoseconds || found == self.index_by_name.end()) {
        warn("ignoring SIMCUDA_COST_NS item '" + std::string(item) + "' (want name:nanoseconds)");
        continue;
      }
      self.slots[found->second].cost_ns = *nanoseconds;
    }
  }
}

Registry& registry() {
  static Registry* instance = [] {
    auto* created = new Registry();  // never destroyed: entry points may run during exit
    apply_environment(*created);
    return created;
  }();
  return *instance;
}

// Note [No guarded statics on entry]: created at load, before any thread can fork.
__attribute__((constructor)) void create_registry_at_load() { (void)registry(); }

thread_local int entry_depth = 0;

// Note [Emulation time]
// simcuda emulates a device call on host memory with system calls (a cuMemMap is an mmap,
// a cuMemSetAccess an mprotect, a cuMemUnmap an mmap over the range), which take
// microseconds a real driver spends differently. A benchmark that prices device calls from
// a table measured on a real GPU must not also count the emulation's time as the caller's
// host time, so it asks for the functions it prices to be timed (simcuda_time_calls) and
// subtracts what this thread spent inside them (simcuda_thread_emulation_ns) from its own
// timings. The clock runs from after the modelled cost (simcuda_set_cost_ns, which stays
// the caller's time) to the call's return; untimed functions never read the clock.
thread_local bool timing_top_level_call = false;
thread_local std::chrono::steady_clock::time_point timed_call_start;
thread_local uint64_t emulation_ns_this_thread = 0;

void busy_wait(uint64_t nanoseconds) {
  auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(nanoseconds);
  while (std::chrono::steady_clock::now() < until) {
  }
}

// Hot path of every entry point: one atomic add, and the fault lock only when faults exist.
int enter_top_level(int index) {
  Registry& self = registry();
  if (index < 0 || index >= kNameCount) return 0;
  Slot& slot = self.slots[index];
  uint64_t call_number = slot.calls.fetch_add(1, std::memory_order_relaxed) + 1;
  if (self.log_calls) std::fprintf(stderr, "simcuda: call %s #%llu\n", kNames[index],
                                   static_cast<unsigned long long>(call_number));
  if (uint64_t cost = slot.cost_ns.load(std::memory_order_relaxed)) busy_wait(cost);
  if (slot.timed.load(std::memory_order_relaxed)) {  // Note [Emulation time]
    timing_top_level_call = true;
    timed_call_start = std::chrono::steady_clock::now();
  }
  if (!slot.has_faults.load(std::memory_order_acquire)) return 0;
  std::lock_guard<std::mutex> lock(self.fault_mutex);
  for (auto it = slot.faults.begin(); it != slot.faults.end(); ++it) {
    if (call_number == it->call_number || (it->from_nth && call_number > it->call_number)) {
      int code = it->error_code;
      if (!it->from_nth) slot.faults.erase(it);
      if (slot.faults.empty()) slot.has_faults = false;
      return code;
    }
  }
  return 0;
}

}  // namespace

int index_of(std::string_view name) {
  auto& self = registry();
  auto found = self.index_by_name.find(name);
  return found == self.index_by_name.end() ? -1 : found->second;
}

const char* name_of(int index) { return index >= 0 && index < kNameCount ? kNames[index] : "?"; }

uint64_t count(int index) {
  return index >= 0 && index < kNameCount ? registry().slots[index].calls.load() : 0;
}

void reset_counts() {
  auto& self = registry();
  std::lock_guard<std::mutex> lock(self.fault_mutex);
  // Faults are counted from the call count at the time they were added; rebase them.
  for (int i = 0; i < kNameCount; ++i) {
    uint64_t before = self.slots[i].calls.exchange(0);
    for (Fault& fault : self.slots[i].faults)
      fault.call_number = fault.call_number > before ? fault.call_number - before : 1;
  }
}

bool add_fault(int index, uint64_t nth, int error_code, bool from_nth) {
  if (index < 0 || index >= kNameCount || nth == 0) return false;
  auto& self = registry();
  std::lock_guard<std::mutex> lock(self.fault_mutex);
  Slot& slot = self.slots[index];
  slot.faults.push_back({slot.calls.load() + nth, error_code, from_nth});
  slot.has_faults = true;
  return true;
}

void clear_faults() {
  auto& self = registry();
  std::lock_guard<std::mutex> lock(self.fault_mutex);
  for (int i = 0; i < kNameCount; ++i) {
    self.slots[i].faults.clear();
    self.slots[i].has_faults = false;
  }
}

void set_cost_ns(int index, uint64_t nanoseconds) {
  if (index >= 0 && index < kNameCount) registry().slots[index].cost_ns = nanoseconds;
}

void set_timed(int index, bool on) {
  if (index >= 0 && index < kNameCount) registry().slots[index].timed = on;
}

uint64_t thread_emulation_ns() { return emulation_ns_this_thread; }

// The top-level call of a timed function returns (Note [Emulation time]).
void finish_timed_call() {
  timing_top_level_call = false;
  emulation_ns_this_thread +=
      static_cast<uint64_t>((std::chrono::steady_clock::now() - timed_call_start).count());
}

}  // namespace simcuda::calls

extern "C" {

int simcuda_core_name_index(const char* function_name) {
  return function_name == nullptr ? -1 : simcuda::calls::index_of(function_name);
}

int simcuda_core_enter(int name_index) {
  int depth = simcuda::calls::entry_depth++;
  return depth == 0 ? simcuda::calls::enter_top_level(name_index) : 0;
}

void simcuda_core_leave(void) {
  if (--simcuda::calls::entry_depth == 0 && simcuda::calls::timing_top_level_call) simcuda::calls::finish_timed_call();
}

void simcuda_core_log_unsupported(const char* function_name) {
  auto& self = simcuda::calls::registry();
  std::lock_guard<std::mutex> lock(self.log_mutex);
  if (self.logged_unsupported.insert(function_name).second)
    std::fprintf(stderr, "simcuda: %s is not supported (returns not-supported)\n", function_name);
}

}  // extern "C"
