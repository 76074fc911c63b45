/* simcuda control API: what tests and benchmarks use to drive the emulated device.
 *
 * simcuda stands in for libcudart.so.13 and libcuda.so.1 on machines without a GPU.
 * Device memory is host memory; kernels are not run. Instead, tests enqueue *simulated
 * kernels* that touch a device range on a stream. They stay pending until the test
 * completes them (or something synchronizes), so stream ordering is observable:
 * cudaEventQuery / cudaStreamQuery answer cudaErrorNotReady while work is pending, and
 * cudaStreamWaitEvent creates real dependencies.
 *
 * Race oracle: at launch, a simulated kernel is checked against every still-pending
 * kernel of other streams that it is not ordered after (through events); overlapping
 * ranges are a race. A kernel (or copy) touching memory that is not allocated/mapped
 * at that moment, and unmapping/freeing memory that a pending kernel touches, are
 * races too. Tests read the count and the details.
 *
 * All functions are thread-safe and exported from libcuda.so.1 (simcuda's), which
 * libcudart.so.13 (simcuda's) also uses, so both see one device state.
 */
#ifndef SIMCUDA_CONTROL_H
#define SIMCUDA_CONTROL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Opaque stream handle: the same value as a cudaStream_t / CUstream (0 = legacy default). */
typedef void* simcuda_stream;

/* ---- simulated kernels ------------------------------------------------------------ */
/* Enqueue a kernel on `stream` that reads (writes == 0) or writes (writes != 0)
 * [ptr, ptr + bytes). Returns a kernel id > 0, or 0 on a bad stream (or the legacy stream
 * while a blocking stream captures). The race check happens here, at launch. On a capturing
 * stream the kernel is recorded into the capture's graph instead, and runs (and is checked)
 * at every launch of the graph. */
uint64_t simcuda_launch(simcuda_stream stream, const void* ptr, size_t bytes, int writes);
/* Same, and when the kernel completes it fills the range with `byte_value`
 * (so tests can observe a late write landing on reused memory). */
uint64_t simcuda_launch_fill(simcuda_stream stream, void* ptr, size_t bytes, uint8_t byte_value);
/* Complete up to `count` pending kernels at the head of `stream`, in order. A kernel whose
 * dependencies (other streams' kernels it waits on) are pending completes those first.
 * Returns how many kernels of `stream` completed. */
size_t simcuda_advance(simcuda_stream stream, size_t count);
/* Complete every pending kernel on every stream and device. */
void simcuda_complete_all(void);
/* Number of pending kernels on a stream (all streams when stream == (void*)-1). */
size_t simcuda_pending(simcuda_stream stream);
/* When on (default off), every launch completes immediately: the fast mode for benchmarks. */
void simcuda_set_auto_complete(int on);

/* ---- race oracle ------------------------------------------------------------------ */
uint64_t simcuda_race_count(void);
/* Writes a human-readable report of every race seen (one per line) into buf, NUL-terminated,
 * truncated to buf_bytes. Returns the length the full report would need. */
size_t simcuda_race_report(char* buf, size_t buf_bytes);
void simcuda_race_reset(void);

/* ---- fault injection ---------------------------------------------------------------- */
/* Make call number `nth` (1-based, counted from now) of the named function fail with
 * `error_code` (a cudaError_t for runtime names, a CUresult for driver names).
 * mode SIMCUDA_FAIL_ONCE fails just that call; SIMCUDA_FAIL_FROM_NTH fails it and every
 * later call until cleared. Returns 0 on success, -1 for an unknown function name.
 * Also from the environment: SIMCUDA_FAIL="cudaMalloc:3:2,cuMemMap:1+:2" (name:nth[+]:code). */
enum { SIMCUDA_FAIL_ONCE = 0, SIMCUDA_FAIL_FROM_NTH = 1 };
int simcuda_fail(const char* function_name, uint64_t nth, int error_code, int mode);
void simcuda_clear_faults(void);

/* ---- counters and cost model ---------------------------------------------------------- */
/* Calls made to a named runtime/driver function since start or the last reset. */
uint64_t simcuda_call_count(const char* function_name);
void simcuda_reset_counters(void);
/* Extra host nanoseconds spent (busy-wait) in every call of the named function, to weigh
 * device calls in benchmarks. Also SIMCUDA_COST_NS="cudaMalloc:20000,cuMemMap:5000". */
int simcuda_set_cost_ns(const char* function_name, uint64_t nanoseconds);
/* Emulation time: simcuda emulates device calls with host system calls (mmap, mprotect)
 * whose time a real driver does not spend. simcuda_time_calls(name, 1) times every
 * top-level call of the named function from after its modelled cost to its return;
 * simcuda_thread_emulation_ns() is the calling thread's total time inside timed calls so
 * far, for a benchmark to subtract from its own timings. Returns 0, or -1 for an unknown
 * function name. */
int simcuda_time_calls(const char* function_name, int on);
uint64_t simcuda_thread_emulation_ns(void);

/* ---- device memory ---------------------------------------------------------------- */
/* Capacity of a device (default SIMCUDA_MEMORY, itself default 80 GiB; number of devices
 * SIMCUDA_DEVICES, default 1). Allocations past the capacity fail. simcuda_set_capacity
 * returns 0, or -1 for an unknown device; simcuda_capacity and simcuda_used_bytes answer 0
 * for an unknown device. */
int simcuda_set_capacity(int device, uint64_t bytes);
uint64_t simcuda_capacity(int device);
/* Bytes of device memory in use: cudaMalloc'd plus physical VMM handles. */
uint64_t simcuda_used_bytes(int device);
/* Is [ptr, ptr+bytes) entirely accessible device memory right now? */
int simcuda_is_accessible(const void* ptr, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif /* SIMCUDA_CONTROL_H */
