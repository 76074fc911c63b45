// The one prologue every simcuda entry point opens with (Note [One prologue]).
// Invariant: a scope enters the call registry on construction and leaves on destruction,
// so nesting depth is always balanced even on early returns.
#pragma once

#include <atomic>

#include "core_abi.h"

namespace simcuda {

// Note [No guarded statics on entry]
// An entry point's first call may come from any thread at any moment, a fork() in another
// thread included. A function-local static with a dynamic initializer is guarded, and a
// child forked while a parent thread was running that initializer waits on the guard
// forever: its first call of that entry point hangs (seen under ThreadSanitizer, which
// widens the window: a child forked beside threads calling cudaMalloc hung in
// cudaMemGetInfo). So the per-entry lookups -- the call registry's index of the entry
// point, the driver function a runtime function uses -- are cached in constant-initialized
// atomics, which need no guard: threads that race may each look the value up, and store the
// same value. The call registry itself is created when the library is loaded.
constexpr int kUnresolvedNameIndex = -2;

// The value in `cache`, looked up (lookup()) and stored while it is still `unresolved`.
template <typename Value, typename Lookup>
Value cached_lookup(std::atomic<Value>& cache, Value unresolved, Lookup lookup) {
  Value value = cache.load(std::memory_order_relaxed);
  if (value == unresolved) {
    value = lookup();
    cache.store(value, std::memory_order_relaxed);
  }
  return value;
}

class EntryScope {
 public:
  explicit EntryScope(int name_index) : injected_error_(simcuda_core_enter(name_index)) {}
  ~EntryScope() { simcuda_core_leave(); }
  EntryScope(const EntryScope&) = delete;
  EntryScope& operator=(const EntryScope&) = delete;
  int injected_error() const { return injected_error_; }

 private:
  int injected_error_;
};

}  // namespace simcuda

// Declares simcuda_entry_scope_ for the enclosing extern "C" function, its name's index
// cached without a guard (Note [No guarded statics on entry]).
#define SIMCUDA_ENTRY_SCOPE()                                                                  \
  static std::atomic<int> simcuda_name_index_{::simcuda::kUnresolvedNameIndex};                \
  ::simcuda::EntryScope simcuda_entry_scope_(::simcuda::cached_lookup(                         \
      simcuda_name_index_, ::simcuda::kUnresolvedNameIndex,                                    \
      [function_name = __func__] { return simcuda_core_name_index(function_name); }))

// Opens an entry point named after the enclosing extern "C" function; returns the injected
// error (as `error_type`) when fault injection says this call fails.
#define SIMCUDA_ENTER(error_type)                  \
  SIMCUDA_ENTRY_SCOPE();                           \
  if (simcuda_entry_scope_.injected_error() != 0) \
  return static_cast<error_type>(simcuda_entry_scope_.injected_error())
