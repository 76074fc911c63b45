/* libfragless's C ABI: a CUDA caching allocator usable from C, from PyTorch's
 * CUDAPluggableAllocator (fragless_malloc / fragless_free), and from any language's FFI.
 * Nothing here throws; functions return fragless_status codes, and the calling thread's
 * last failure is described by fragless_last_error(). No CUDA header is needed: streams
 * are passed as opaque pointers (the cudaStream_t value; NULL is the legacy default).
 */
#ifndef FRAGLESS_FRAGLESS_H
#define FRAGLESS_FRAGLESS_H

#include <stddef.h>
#include <stdint.h>

#include "fragless/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef void* fragless_stream_t; /* a cudaStream_t */

typedef enum fragless_status {
  FRAGLESS_OK = 0,
  FRAGLESS_ERROR_OUT_OF_MEMORY = 1,    /* device memory exhausted (after releasing cache) */
  FRAGLESS_ERROR_INVALID_POINTER = 2,  /* unknown pointer, not a block start, double free */
  FRAGLESS_ERROR_INVALID_ARGUMENT = 3, /* bad device, stream of another device, bad value */
  FRAGLESS_ERROR_DEVICE = 4,           /* a CUDA call failed */
  FRAGLESS_ERROR_INTERNAL = 5          /* anything else (host memory exhaustion...) */
} fragless_status;

/* The calling thread's last error message ("" if none). Valid until its next call. */
FRAGLESS_API const char* fragless_last_error(void);

/* Allocation. size 0 gives *ptr == NULL and FRAGLESS_OK. */
FRAGLESS_API fragless_status fragless_allocate(void** ptr, size_t size, int device, fragless_stream_t stream);
/* Frees a block (stream-ordered on its allocation stream and every record_stream one). */
FRAGLESS_API fragless_status fragless_deallocate(void* ptr);
/* Marks a block as used on another stream: not reused until that stream's work queued
 * before the free has completed. */
FRAGLESS_API fragless_status fragless_record_stream(void* ptr, fragless_stream_t stream);
/* Call before destroying `stream`: a later stream with the same handle inherits none of its
 * cached memory (Note [Retired streams]). Always FRAGLESS_OK. */
FRAGLESS_API fragless_status fragless_retire_stream(fragless_stream_t stream);

/* PyTorch CUDAPluggableAllocator pair. fragless_malloc returns NULL on failure (see
 * fragless_last_error); fragless_free ignores size/device/stream (the block knows them). */
FRAGLESS_API void* fragless_malloc(size_t size, int device, fragless_stream_t stream);
FRAGLESS_API void fragless_free(void* ptr, size_t size, int device, fragless_stream_t stream);

/* Control. *released_bytes (may be NULL) receives the bytes given back to the device.
 * `device` of empty_cache, trim, compact and the two resets: an index, or -1 for every device
 * used so far; any other negative value is FRAGLESS_ERROR_INVALID_ARGUMENT
 * (Note [Device arguments] in api/cxx_api.cpp). */
FRAGLESS_API fragless_status fragless_empty_cache(int device, size_t* released_bytes);
FRAGLESS_API fragless_status fragless_trim(int device, size_t bytes_to_keep, size_t* released_bytes);
/* A compaction pass (docs/compaction.md): gives back free pages no stream can still touch,
 * without a device synchronization. Either out-pointer may be NULL. device -1: all. */
FRAGLESS_API fragless_status fragless_compact(int device, size_t* released_bytes, size_t* unmapped_pages);
FRAGLESS_API fragless_status fragless_set_memory_fraction(double fraction, int device);
FRAGLESS_API fragless_status fragless_reset_peak_stats(int device);
FRAGLESS_API fragless_status fragless_reset_accumulated_stats(int device);

/* Stats, the few most asked-for figures (the full set: fragless_memory_stats_json). */
typedef struct fragless_memory_figures {
  int64_t allocated_bytes;
  int64_t allocated_bytes_peak;
  int64_t reserved_bytes;
  int64_t reserved_bytes_peak;
  int64_t active_bytes;
  int64_t requested_bytes;
  int64_t num_alloc_retries;
  int64_t num_ooms;
  int64_t num_sync_all_streams;
  int64_t num_device_alloc;
  int64_t num_device_free;
} fragless_memory_figures;
FRAGLESS_API fragless_status fragless_get_memory_figures(int device, fragless_memory_figures* figures);
/* Writes a human-readable summary into buf (NUL-terminated, truncated to buf_bytes);
 * *needed_bytes (may be NULL) receives the full length + 1. */
FRAGLESS_API fragless_status fragless_memory_summary(int device, char* buf, size_t buf_bytes, size_t* needed_bytes);
/* Every stats field as JSON (the same text as fragless::stats_json), written like
 * fragless_memory_summary. */
FRAGLESS_API fragless_status fragless_memory_stats_json(int device, char* buf, size_t buf_bytes, size_t* needed_bytes);

/* The allocation that contains ptr (a fragless block; ptr may point inside it): its start and
 * size. PyTorch uses it to share whole allocations between processes. */
FRAGLESS_API fragless_status fragless_base_allocation(void* ptr, void** base, size_t* size);

/* The optional functions of PyTorch's CUDAPluggableAllocator, with the signatures its
 * set_init_fn / set_reset_fn / set_memory_fraction_fn / set_record_stream_fn /
 * set_base_alloc_fn take. They return nothing (failures are logged and left in
 * fragless_last_error()). */
FRAGLESS_API void fragless_pluggable_init(int device_count);
FRAGLESS_API void fragless_pluggable_reset(void);
FRAGLESS_API void fragless_pluggable_set_memory_fraction(double fraction, int device);
FRAGLESS_API void fragless_pluggable_record_stream(void* ptr, fragless_stream_t stream);
FRAGLESS_API void* fragless_pluggable_base_alloc(void* ptr, size_t* size);

#ifdef __cplusplus
}
#endif

#endif /* FRAGLESS_FRAGLESS_H */
