// libfragless's C++ API: a caching allocator for CUDA device memory.
// Every function is thread-safe. Errors are exceptions derived from fragless::error;
// free, record and teardown paths that cannot report through a return value never throw
// (deallocate throws only for a pointer it does not own, before changing anything).
// Streams are opaque pointers holding the cudaStream_t value (nullptr: legacy default).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "fragless/export.h"
#include "fragless/stats.hpp"
#include "fragless/stats_snapshot.hpp"

namespace fragless {

using stream_t = void*;

// ---- errors ----
enum class error_code { out_of_memory = 1, invalid_pointer = 2, invalid_argument = 3, device = 4, internal = 5 };

class FRAGLESS_API error : public std::runtime_error {
 public:
  error(error_code code, const std::string& message) : std::runtime_error(message), code_(code) {}
  error_code code() const noexcept { return code_; }

 private:
  error_code code_;
};

// Message starts "CUDA out of memory. Tried to allocate ..." (PyTorch's shape).
class FRAGLESS_API out_of_memory_error : public error {
 public:
  explicit out_of_memory_error(const std::string& message) : error(error_code::out_of_memory, message) {}
};
class FRAGLESS_API invalid_argument_error : public error {
 public:
  explicit invalid_argument_error(const std::string& message, error_code code = error_code::invalid_argument)
      : error(code, message) {}
};
// A pointer fragless did not hand out, or already took back, or that points inside a block.
class FRAGLESS_API invalid_pointer_error : public invalid_argument_error {
 public:
  explicit invalid_pointer_error(const std::string& message)
      : invalid_argument_error(message, error_code::invalid_pointer) {}
};
class FRAGLESS_API device_error : public error {
 public:
  explicit device_error(const std::string& message) : error(error_code::device, message) {}
};

// ---- allocation ----
// A block of at least `size_bytes`, 512 B aligned, usable on `stream` of `device`.
// size 0 returns nullptr. @throws out_of_memory_error, invalid_argument_error, device_error
FRAGLESS_API void* allocate(std::size_t size_bytes, int device, stream_t stream);
// Frees a block: reusable at once on its allocation stream, elsewhere only once the work of
// every stream that used it is ordered before the new use. nullptr is ignored.
// @throws invalid_pointer_error (nothing changed)
FRAGLESS_API void deallocate(void* pointer);
// The block will also be used on `stream`. @throws invalid_pointer_error, invalid_argument_error
FRAGLESS_API void record_stream(void* pointer, stream_t stream);
// `stream` is about to be destroyed (call it before cudaStreamDestroy): a later stream that
// receives the same handle inherits none of its cached memory (Note [Retired streams]).
// The LD_PRELOAD interposer calls it for every cudaStreamDestroy / cuStreamDestroy.
FRAGLESS_API void retire_stream(stream_t stream) noexcept;

// ---- private pools ----
// A pool is a cache of its own on one device: blocks allocated from it are never reused
// by allocations outside it (CUDA graph capture, torch.cuda.MemPool). Blocks free with
// deallocate() like any other. Stats, snapshot, empty_cache, trim and compact of a device
// cover its pools (Note [Private pools] in core/private_pools.hpp).
using pool_id = std::uint64_t;  // never 0
// @throws invalid_argument_error (no such device), device_error
FRAGLESS_API pool_id create_pool(int device);
// @throws out_of_memory_error, invalid_argument_error (unknown or released pool), device_error
FRAGLESS_API void* allocate_from_pool(pool_id pool, std::size_t size_bytes, stream_t stream);
// Ends the pool: no more allocations from it, and its unused cached memory goes back to
// CUDA (one device synchronization). Its live blocks still free as usual; once none is in
// use, its cache serves a later pool of the device. Unknown ids are ignored.
FRAGLESS_API void release_pool(pool_id pool) noexcept;
// Returns the pool's unused cached bytes to CUDA (like empty_cache, for one pool).
// @throws invalid_argument_error (unknown or released pool)
FRAGLESS_API std::size_t empty_pool_cache(pool_id pool);

// ---- sharing blocks with other processes (CUDA IPC) ----
// export_block: a handle (opaque bytes) naming the memory of the live block starting at
// `pointer`; any process of the same user on the machine can open it while the block is
// live (Note [IPC sharing] in core/ipc_sharing.hpp). Exporting again returns the same
// handle. @throws invalid_pointer_error, device_error
FRAGLESS_API std::string export_block(void* pointer);
// Maps a handle from export_block (this process or another) and returns the block's
// address here; the memory stays valid until close_imported_block, even after the
// exporter frees the block. @throws invalid_argument_error, device_error
FRAGLESS_API void* import_block(const std::string& handle);
FRAGLESS_API void close_imported_block(void* pointer) noexcept;

// ---- CUDA graph capture ----
// Tell fragless a stream capture begins / ended (process-wide, nesting). While one is
// underway fragless makes no call that capture forbids -- no event queries, device
// synchronization or memory release; its allocation calls run in relaxed capture mode --
// so cached memory is not given back until the capture ends (Note [Capture underway] in
// backend/capture_aware_backend.hpp). The PyTorch integration calls these itself.
FRAGLESS_API void begin_capture() noexcept;
FRAGLESS_API void end_capture() noexcept;

// ---- control ----
// Returns every unused cached byte of the device (and of its private pools) to CUDA
// (synchronizes the device once per cache).
FRAGLESS_API std::size_t empty_cache(int device = -1);  // -1: every device initialised so far
// Like empty_cache, but the caches of pools not yet released keep their memory (PyTorch's
// empty_cache: a live pool's free blocks may still be used by a captured CUDA graph).
FRAGLESS_API std::size_t empty_cache_keeping_live_pools(int device = -1);
// Like empty_cache but keeps up to `bytes_to_keep` cached bytes.
FRAGLESS_API std::size_t trim(std::size_t bytes_to_keep, int device = -1);
// A compaction pass (Note [Compaction], docs/compaction.md): unmaps every free page and
// cached mapping no stream can still touch (event checks, no device synchronization),
// keeps a few unmapped pages for reuse and gives the rest back. Live blocks never move.
struct compact_result {
  std::size_t released_bytes = 0;  // reserved bytes returned to the device
  std::size_t unmapped_pages = 0;  // free pages unmapped (released, or kept for remapping)
};
FRAGLESS_API compact_result compact(int device = -1);  // -1: every device initialised so far
// Caps the device's reserved memory at fraction * total capacity (0 < fraction <= 1).
FRAGLESS_API void set_memory_fraction(double fraction, int device);
// The device of empty_cache, trim, compact and the two resets is an index, or -1 for every
// device used so far; any other negative value throws invalid_argument_error
// (Note [Device arguments] in api/cxx_api.cpp).
FRAGLESS_API void reset_peak_stats(int device = -1);
FRAGLESS_API void reset_accumulated_stats(int device = -1);
// The device's stats, summed over its own cache and its private pools'
// (Note [Summed stats] in stats/stat_fields.cpp: with pools, peaks are an upper bound).
FRAGLESS_API device_stats get_device_stats(int device);
// The running counters only, without the layout figures that need a snapshot walk
// (segment counts, inactive splits, largest free block are left as last computed): cheap
// enough for a hook to call on every allocation.
FRAGLESS_API device_stats get_device_counters(int device);
// PyTorch's memory_summary table for the device (plus fragless's own figures).
FRAGLESS_API std::string memory_summary(int device);
// Name of the device-memory backend in use on the device ("vmm" or "cudaMalloc").
FRAGLESS_API std::string backend_name(int device);

// ---- segment events ----
// Device memory being mapped or unmapped (vmm backend: pages, and runs of them), or
// obtained or given back whole (cudaMalloc segments, dedicated and stitched mappings), for
// allocation histories such as PyTorch's memory_viz (segment_map / segment_unmap /
// segment_alloc / segment_free).
enum class segment_event_kind : std::uint8_t { map, unmap, alloc, free };
struct segment_event {
  int device = 0;
  segment_event_kind kind = segment_event_kind::map;
  std::uintptr_t address = 0;
  std::size_t size_bytes = 0;
};
using segment_observer = void (*)(const segment_event& event, void* context);
// Installs the process's one observer (nullptr removes it). It is called with the device's
// lock held, from any thread that allocates, frees or compacts: it must be quick and must
// not call into fragless. Exceptions it throws are swallowed.
FRAGLESS_API void set_segment_observer(segment_observer observer, void* context);

// ---- snapshot ----
// Every segment of the device with its blocks (fragless/stats_snapshot.hpp; blocks exactly
// cover their segment). Large-pool segments are the reserved regions (cudaMalloc segments
// or runs of mapped VMM pages) minus the slabs inside them; each slab is a small-pool
// segment. Take it while no other thread allocates or frees for an exact picture.
FRAGLESS_API memory_snapshot snapshot(int device);
// The snapshot as fragless JSON (Note [Snapshot JSON]) and as a PyTorch-style pickle.
FRAGLESS_API std::string snapshot_json(int device);
FRAGLESS_API std::string snapshot_pickle(int device);
// The stats as JSON (Note [Stats JSON]); the second form writes given stats (the torch
// adapter's, which leave out blocks held for graph-tree checkpoints).
FRAGLESS_API std::string stats_json(int device);
FRAGLESS_API std::string stats_json(const device_stats& stats, int device);

}  // namespace fragless
