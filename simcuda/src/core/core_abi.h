/* The small C ABI that simcuda's libcuda.so.1 exports for simcuda's own libcudart.so.13.
 * The runtime library keeps no device state: it enters through the common prologue here
 * and calls the driver's functions through simcuda_core_driver_proc, which hands out the
 * driver library's own implementations (never an interposed symbol).
 * Invariant: every simcuda_core_enter is paired with one simcuda_core_leave on the same thread.
 */
#ifndef SIMCUDA_CORE_ABI_H
#define SIMCUDA_CORE_ABI_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SIMCUDA_CORE_API __attribute__((visibility("default")))

/* Index of a runtime or driver function name in the call registry, -1 if unknown. */
SIMCUDA_CORE_API int simcuda_core_name_index(const char* function_name);
/* The common prologue (Note [One prologue]): counts the call, spends its modelled cost and
 * returns the injected error code for this call, or 0. Calls nested inside another entry
 * point (the runtime calling the driver) are not counted and never fail. */
SIMCUDA_CORE_API int simcuda_core_enter(int name_index);
SIMCUDA_CORE_API void simcuda_core_leave(void);
/* Writes "simcuda: <name> is not supported" to stderr the first time it is called for a name. */
SIMCUDA_CORE_API void simcuda_core_log_unsupported(const char* function_name);
/* The driver function for a name as cuGetProcAddress resolves it, or NULL. */
SIMCUDA_CORE_API void* simcuda_core_driver_proc(const char* symbol, unsigned cuda_version);

#ifdef __cplusplus
}
#endif

#endif /* SIMCUDA_CORE_ABI_H */
