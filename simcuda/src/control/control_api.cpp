// The simcuda control API of include/simcuda/control.h, exported from libcuda.so.1.
// Invariant: thin forwarders; each takes the state lock (or uses the lock-free call
// registry) and never fails by crashing on bad input.
#include "simcuda/control.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "../core/call_registry.h"
#include "../core/device_memory.h"
#include "../core/device_state.h"
#include "../core/pending_work.h"
#include "../core/stream_capture.h"

#define SIMCUDA_CONTROL extern "C" __attribute__((visibility("default")))

using namespace simcuda;

namespace {

uint64_t launch(simcuda_stream handle, const void* pointer, size_t bytes, bool writes, bool fills, uint8_t value) {
  auto lock = lock_state();
  Stream* stream = resolve_stream_locked(handle);
  if (stream == nullptr) return 0;
  // Note [Stream capture]: the legacy stream is unusable while a blocking stream captures.
  if (check_legacy_stream_use_locked(*stream, true) != CUDA_SUCCESS) return 0;
  auto begin = reinterpret_cast<uintptr_t>(pointer);
  uintptr_t end = begin + bytes < begin ? UINTPTR_MAX : begin + bytes;  // a wrapped range is clamped
  std::vector<Access> accesses;
  if (bytes > 0) accesses.push_back(Access{begin, end, writes});  // an empty kernel touches nothing
  std::function<void()> on_complete;
  if (fills) {
    // Note: the fill lands when the kernel completes, on whatever is mapped there then.
    on_complete = [begin, bytes, value] {
      if (is_accessible_locked(begin, bytes)) std::memset(reinterpret_cast<void*>(begin), value, bytes);
    };
  }
  return launch_locked(*stream, std::move(accesses), std::move(on_complete), "kernel", bytes);
}

}  // namespace

SIMCUDA_CONTROL uint64_t simcuda_launch(simcuda_stream stream, const void* ptr, size_t bytes, int writes) {
  return launch(stream, ptr, bytes, writes != 0, false, 0);
}

SIMCUDA_CONTROL uint64_t simcuda_launch_fill(simcuda_stream stream, void* ptr, size_t bytes, uint8_t byte_value) {
  return launch(stream, ptr, bytes, true, true, byte_value);
}

SIMCUDA_CONTROL size_t simcuda_advance(simcuda_stream stream, size_t count) {
  auto lock = lock_state();
  Stream* resolved = resolve_stream_locked(stream);
  return resolved == nullptr ? 0 : advance_locked(*resolved, count);
}

SIMCUDA_CONTROL void simcuda_complete_all(void) {
  auto lock = lock_state();
  complete_all_locked();
}

SIMCUDA_CONTROL size_t simcuda_pending(simcuda_stream stream) {
  auto lock = lock_state();
  if (stream == reinterpret_cast<simcuda_stream>(-1)) return pending_count_locked();
  Stream* resolved = resolve_stream_locked(stream);
  return resolved == nullptr ? 0 : resolved->pending.size();
}

SIMCUDA_CONTROL void simcuda_set_auto_complete(int on) {
  auto lock = lock_state();
  state().auto_complete = on != 0;
  if (on != 0) complete_all_locked();
}

SIMCUDA_CONTROL uint64_t simcuda_race_count(void) {
  auto lock = lock_state();
  return state().race_count;
}

SIMCUDA_CONTROL size_t simcuda_race_report(char* buf, size_t buf_bytes) {
  auto lock = lock_state();
  std::string report;
  for (const std::string& line : state().race_reports) report += line + "\n";
  if (buf != nullptr && buf_bytes > 0) {
    size_t copied = std::min(report.size(), buf_bytes - 1);
    std::memcpy(buf, report.data(), copied);
    buf[copied] = '\0';
  }
  return report.size();
}

SIMCUDA_CONTROL void simcuda_race_reset(void) {
  auto lock = lock_state();
  state().race_reports.clear();
  state().race_count = 0;
}

SIMCUDA_CONTROL int simcuda_fail(const char* function_name, uint64_t nth, int error_code, int mode) {
  if (function_name == nullptr) return -1;
  int index = calls::index_of(function_name);
  if (index < 0) return -1;
  return calls::add_fault(index, nth, error_code, mode == SIMCUDA_FAIL_FROM_NTH) ? 0 : -1;
}

SIMCUDA_CONTROL void simcuda_clear_faults(void) { calls::clear_faults(); }

SIMCUDA_CONTROL uint64_t simcuda_call_count(const char* function_name) {
  return function_name == nullptr ? 0 : calls::count(calls::index_of(function_name));
}

SIMCUDA_CONTROL void simcuda_reset_counters(void) { calls::reset_counts(); }

SIMCUDA_CONTROL int simcuda_set_cost_ns(const char* function_name, uint64_t nanoseconds) {
  int index = function_name == nullptr ? -1 : calls::index_of(function_name);
  if (index < 0) return -1;
  calls::set_cost_ns(index, nanoseconds);
  return 0;
}

SIMCUDA_CONTROL int simcuda_time_calls(const char* function_name, int on) {
  int index = function_name == nullptr ? -1 : calls::index_of(function_name);
  if (index < 0) return -1;
  calls::set_timed(index, on != 0);
  return 0;
}

SIMCUDA_CONTROL uint64_t simcuda_thread_emulation_ns(void) { return calls::thread_emulation_ns(); }

SIMCUDA_CONTROL int simcuda_set_capacity(int device, uint64_t bytes) {
  auto lock = lock_state();
  if (!valid_device_locked(device)) return -1;
  state().devices[static_cast<size_t>(device)].capacity_bytes = bytes;
  return 0;
}

SIMCUDA_CONTROL uint64_t simcuda_capacity(int device) {
  auto lock = lock_state();
  return valid_device_locked(device) ? state().devices[static_cast<size_t>(device)].capacity_bytes : 0;
}

SIMCUDA_CONTROL uint64_t simcuda_used_bytes(int device) {
  auto lock = lock_state();
  return valid_device_locked(device) ? state().devices[static_cast<size_t>(device)].used_bytes : 0;
}

SIMCUDA_CONTROL int simcuda_is_accessible(const void* ptr, size_t bytes) {
  auto lock = lock_state();
  return is_accessible_locked(reinterpret_cast<uintptr_t>(ptr), bytes) ? 1 : 0;
}
