// The one prologue every simcuda entry point opens with (Note [One prologue]).
// Invariant: a scope enters the call registry on construction and leaves on destruction,
// so nesting depth is always balanced even on early returns.
#pragma once

#include "core_abi.h"

namespace simcuda {

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

// Opens an entry point named after the enclosing extern "C" function; returns the injected
// error (as `error_type`) when fault injection says this call fails.
#define SIMCUDA_ENTER(error_type)                                                      \
  static const int simcuda_name_index_ = simcuda_core_name_index(__func__);            \
  ::simcuda::EntryScope simcuda_entry_scope_(simcuda_name_index_);                      \
  if (simcuda_entry_scope_.injected_error() != 0)                                       \
  return static_cast<error_type>(simcuda_entry_scope_.injected_error())
