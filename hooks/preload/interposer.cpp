// libfragless_preload.so: LD_PRELOAD interposer that routes a dynamically linked CUDA
// program's device allocations through fragless. Thin forwarders only: policy lives in
// the allocator; this file decides which calls are ours and keeps CUDA's semantics.
// Invariant: a pointer is freed by fragless iff fragless handed it out; anything else is
// forwarded to the real function (Note [Resolving the real runtime], real_cuda.cpp).
//
// Note [Plain cudaFree]
// cudaMalloc's memory is usable at once on ANY stream, because the real cudaFree
// synchronized the device before the memory could come back. fragless keeps that promise
// without synchronizing the device:
//  - plain cudaMalloc / cuMemAlloc allocate on a private non-blocking stream of the
//    interposer (one per device) that never runs work;
//  - plain cudaFree / cuMemFree record the block as used on the legacy default stream and on
//    every live non-blocking stream the program created, then free it. The legacy-stream
//    event completes only after all earlier work of the legacy stream, every blocking stream
//    and the per-thread default streams (work on the legacy stream waits for them), and the
//    other events cover the non-blocking streams; so the block stays pending until the work
//    queued before the free is done;
//  - when the allocator hands the private stream a block by making it wait on other streams'
//    events (Note [Stream reuse], counted in num_cross_stream_waits), the interposer
//    synchronizes the private stream before returning: the host waits only for the work the
//    real cudaFree would have waited for, and only when reuse crosses streams.
// Streams created through the driver API (cuStreamCreate) are not tracked; programs mixing
// those with plain cudaFree should free with cudaFreeAsync on the right stream.
// Proven by the race-oracle tests in tests/hooks.
//
// Note [Fork]
// CUDA cannot be used in a child forked after the parent initialised it. In a forked child
// every interposed call goes straight to the real function (which reports the real error),
// so the child never touches a lock another parent thread may have held at fork time. Nor
// a function-local static's guard: what the child's fork handler and passthrough check read
// is made at load, or read without a guard, so that a parent thread making it at fork time
// cannot leave the child waiting (seen under ThreadSanitizer, which widens that window).
//
// Note [Errors through the runtime]
// The interposer returns the code the real runtime would, and leaves cudaGetLastError() as
// the real runtime would: a failed call records its error as the thread's last error. That
// state is private to libcudart (there is no public setter), and fragless's backend clears
// the errors of its own calls, so the interposer records an error by making one harmless
// real call, last, that fails the same way:
//  - a stream fragless cannot use (destroyed, or never created): the real
//    cudaStreamGetDevice(stream), the runtime's own check of that handle, which gives the
//    code (cudaErrorInvalidResourceHandle for a dead handle) and records it. Nothing is
//    freed: the block stays the caller's, as with the real cudaFreeAsync;
//  - out of memory: the real cudaMalloc of SIZE_MAX bytes, which can never succeed and
//    records cudaErrorMemoryAllocation (in relaxed capture mode, so that it cannot
//    invalidate a stream capture under way);
//  - an invalid value: the real cudaGetDevice(nullptr), which records cudaErrorInvalidValue.
// The driver API has no last error: its calls only return the matching CUresult, with no
// runtime call made for them (caller::driver below).
//
// Note [Stream destruction]
// cudaStreamDestroy / cuStreamDestroy(_v2) retire the stream in fragless before the real
// destroy (fragless::retire_stream, Note [Retired streams] in the allocator): a later stream
// that receives the same handle value must not inherit memory the dying stream's queued
// work may still touch. The real destroy returns at once and that work still runs.
//
// Note [Passthrough]
// FRAGLESS_PASSTHROUGH=1 forwards everything to the real runtime (compute-sanitizer,
// debugging): the interposer is then a no-op.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>

#include "fragless/fragless.hpp"
#include "preload/real_cuda.hpp"
#include "preload/stream_registry.hpp"

#define FRAGLESS_INTERPOSED extern "C" __attribute__((visibility("default")))

namespace fragless::preload {
namespace {

std::atomic<bool> in_forked_child{false};  // Note [Fork]

void on_fork_child() {
  in_forked_child.store(true, std::memory_order_relaxed);
  non_blocking_streams().reset_after_fork();
}

bool passthrough_from_environment() {
  const char* value = std::getenv("FRAGLESS_PASSTHROUGH");
  return value != nullptr && (std::strcmp(value, "1") == 0 || std::strcmp(value, "true") == 0 ||
                              std::strcmp(value, "True") == 0);
}

// Note [Passthrough]: read on first use. Not a function-local static: its guard, held by a
// parent thread at fork time, would hang the child's first call (Note [Fork]); threads
// that race here each read the environment and store the same answer.
enum passthrough_setting : int { unread, off, on };
std::atomic<int> passthrough_from_env{unread};

bool passthrough() {  // Note [Passthrough], and Note [Fork] in a forked child
  int setting = passthrough_from_env.load(std::memory_order_relaxed);
  if (setting == unread) {
    setting = passthrough_from_environment() ? on : off;
    passthrough_from_env.store(setting, std::memory_order_relaxed);
  }
  return setting == on || in_forked_child.load(std::memory_order_relaxed);
}

__attribute__((constructor)) void register_fork_handler() { pthread_atfork(nullptr, nullptr, on_fork_child); }

int current_device() {
  int device = 0;
  if (real().get_device == nullptr || real().get_device(&device) != cudaSuccess) device = 0;
  return device;
}

// Note [Errors through the runtime]: makes the real runtime record `error` as this thread's
// last error (for the codes the interposer returns) and returns it.
enum class caller { runtime, driver };  // which API the interposed call belongs to

cudaError_t record_last_error(cudaError_t error, caller api = caller::runtime) noexcept {
  if (api == caller::driver) return error;
  switch (error) {
    case cudaErrorMemoryAllocation:
      if (real().malloc != nullptr) {
        cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
        const bool exchanged = real().thread_exchange_stream_capture_mode != nullptr &&
                               real().thread_exchange_stream_capture_mode(&mode) == cudaSuccess;
        void* never = nullptr;
        if (real().malloc(&never, SIZE_MAX) == cudaSuccess && never != nullptr) real().free(never);
        if (exchanged) real().thread_exchange_stream_capture_mode(&mode);
      }
      break;
    case cudaErrorInvalidValue:
      if (real().get_device != nullptr) real().get_device(nullptr);
      break;
    default: break;
  }
  return error;
}

// Note [Errors through the runtime]: the real runtime's verdict on a stream fragless could
// not use, recorded as the last error; cudaErrorInvalidValue when the runtime accepts the
// handle (a stream of another device than the block's).
cudaError_t stream_error(cudaStream_t stream, caller api = caller::runtime) noexcept {
  if (api == caller::driver) return cudaErrorInvalidResourceHandle;
  int device = 0;
  const cudaError_t verdict =
      real().stream_get_device != nullptr ? real().stream_get_device(stream, &device) : cudaErrorInvalidResourceHandle;
  return verdict != cudaSuccess ? verdict : record_last_error(cudaErrorInvalidValue);
}

// Maps a fragless exception to the runtime's error codes.
cudaError_t runtime_error_of(const fragless::error& failure) {
  switch (failure.code()) {
    case error_code::out_of_memory: return cudaErrorMemoryAllocation;
    case error_code::invalid_pointer:
    case error_code::invalid_argument: return cudaErrorInvalidValue;
    default: return cudaErrorUnknown;
  }
}

CUresult driver_error_of(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return CUDA_SUCCESS;
    case cudaErrorMemoryAllocation: return CUDA_ERROR_OUT_OF_MEMORY;
    case cudaErrorInvalidValue: return CUDA_ERROR_INVALID_VALUE;
    case cudaErrorInvalidResourceHandle: return CUDA_ERROR_INVALID_HANDLE;
    case cudaErrorContextIsDestroyed: return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    case cudaErrorInvalidDevice: return CUDA_ERROR_INVALID_DEVICE;
    default: return CUDA_ERROR_UNKNOWN;
  }
}

// Note [Errors through the runtime]: every failure is recorded as the last error.
cudaError_t allocate_on(void** pointer, size_t size, cudaStream_t stream, caller api = caller::runtime) {
  if (pointer == nullptr) return record_last_error(cudaErrorInvalidValue, api);
  try {
    *pointer = fragless::allocate(size, current_device(), stream);
    return cudaSuccess;
  } catch (const fragless::invalid_argument_error&) {
    *pointer = nullptr;
    return stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread
               ? record_last_error(cudaErrorInvalidValue, api)
               : stream_error(stream, api);
  } catch (const fragless::error& failure) {
    *pointer = nullptr;
    return record_last_error(runtime_error_of(failure), api);
  } catch (...) {
    *pointer = nullptr;
    return record_last_error(cudaErrorMemoryAllocation, api);
  }
}

// The interposer's private stream of `device` (Note [Plain cudaFree]); nullptr if it cannot
// be created (then plain allocations fall back to the legacy stream and synchronize it).
cudaStream_t private_stream(int device) {
  constexpr int kMaxDevices = 64;
  static std::atomic<cudaStream_t> streams[kMaxDevices] = {};
  static std::mutex creation;
  if (device < 0 || device >= kMaxDevices) return nullptr;
  cudaStream_t stream = streams[device].load(std::memory_order_acquire);
  if (stream != nullptr) return stream;
  std::lock_guard<std::mutex> lock(creation);
  stream = streams[device].load(std::memory_order_relaxed);
  if (stream == nullptr && real().stream_create_with_flags(&stream, cudaStreamNonBlocking) == cudaSuccess)
    streams[device].store(stream, std::memory_order_release);
  return streams[device].load(std::memory_order_relaxed);
}

// Plain cudaMalloc / cuMemAlloc: a block usable at once on any stream.
cudaError_t allocate_plain(void** pointer, size_t size, caller api = caller::runtime) {
  const int device = current_device();
  cudaStream_t stream = private_stream(device);
  std::int64_t waits_before = 0;
  try {
    waits_before = fragless::get_device_counters(device).num_cross_stream_waits;
  } catch (...) {
  }
  const cudaError_t result = allocate_on(pointer, size, stream, api);
  if (result != cudaSuccess) return result;
  try {
    if (stream == nullptr || fragless::get_device_counters(device).num_cross_stream_waits != waits_before)
      real().stream_synchronize(stream);
  } catch (...) {
    real().stream_synchronize(stream);
  }
  return cudaSuccess;
}

enum class free_outcome { not_ours, freed, failed };

// Frees a fragless block. not_ours: fragless does not own `pointer`. failed: ours, but the
// stream cannot be used or the record failed; nothing was freed and `*error` says why, as
// the real runtime would (Note [Errors through the runtime]).
free_outcome free_if_ours(void* pointer, cudaStream_t stream, bool plain_free, cudaError_t* error,
                          caller api = caller::runtime) noexcept {
  try {
    if (plain_free) {
      // Note [Plain cudaFree]: pending until the work of every stream queued before now is done.
      fragless::record_stream(pointer, cudaStreamLegacy);
      for (void* other : non_blocking_streams().non_blocking_streams()) fragless::record_stream(pointer, other);
    } else if (stream != nullptr) {
      fragless::record_stream(pointer, stream);
    }
    fragless::deallocate(pointer);
    return free_outcome::freed;
  } catch (const fragless::invalid_pointer_error&) {
    return free_outcome::not_ours;
  } catch (const fragless::invalid_argument_error&) {
    *error = plain_free ? record_last_error(cudaErrorInvalidValue, api) : stream_error(stream, api);
    return free_outcome::failed;
  } catch (...) {
    *error = record_last_error(cudaErrorMemoryAllocation, api);  // host memory for the record
    return free_outcome::failed;
  }
}

}  // namespace
}  // namespace fragless::preload

using namespace fragless::preload;

// ---- runtime API -------------------------------------------------------------------------

FRAGLESS_INTERPOSED cudaError_t cudaMalloc(void** pointer, size_t size) {
  if (passthrough()) return real().malloc(pointer, size);
  return allocate_plain(pointer, size);
}

FRAGLESS_INTERPOSED cudaError_t cudaFree(void* pointer) {
  // cudaFree(nullptr) / cudaFree(0) initialises the runtime: forward it.
  if (pointer == nullptr || passthrough()) return real().free(pointer);
  cudaError_t error = cudaSuccess;
  switch (free_if_ours(pointer, nullptr, /*plain_free=*/true, &error)) {
    case free_outcome::freed: return cudaSuccess;
    case free_outcome::failed: return error;
    case free_outcome::not_ours: break;
  }
  return real().free(pointer);
}

FRAGLESS_INTERPOSED cudaError_t cudaMallocAsync(void** pointer, size_t size, cudaStream_t stream) {
  if (passthrough()) return real().malloc_async(pointer, size, stream);
  return allocate_on(pointer, size, stream);
}

FRAGLESS_INTERPOSED cudaError_t cudaFreeAsync(void* pointer, cudaStream_t stream) {
  if (pointer == nullptr || passthrough()) return real().free_async(pointer, stream);
  // A stream-ordered free on `stream`: the block is also used there (it may differ from the
  // allocation stream), then freed.
  cudaError_t error = cudaSuccess;
  switch (free_if_ours(pointer, stream, /*plain_free=*/false, &error)) {
    case free_outcome::freed: return cudaSuccess;
    case free_outcome::failed: return error;
    case free_outcome::not_ours: break;
  }
  return real().free_async(pointer, stream);
}

// Allocations from an explicit memory pool keep that pool's semantics (attributes, access,
// IPC export): they are not ours and go to the real runtime.
FRAGLESS_INTERPOSED cudaError_t cudaMallocFromPoolAsync(void** pointer, size_t size, cudaMemPool_t pool,
                                                        cudaStream_t stream) {
  return real().malloc_from_pool_async(pointer, size, pool, stream);
}

FRAGLESS_INTERPOSED cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  cudaError_t result = real().mem_get_info(free_bytes, total_bytes);
  if (result != cudaSuccess || passthrough() || free_bytes == nullptr) return result;
  // Memory fragless holds in its cache is free for this program's next cudaMalloc.
  try {
    const fragless::device_stats stats = fragless::get_device_counters(current_device());
    const auto cached = stats.reserved_bytes[fragless::pool_all].current - stats.allocated_bytes[fragless::pool_all].current;
    if (cached > 0) *free_bytes += static_cast<size_t>(cached);
  } catch (...) {
  }
  return cudaSuccess;
}

FRAGLESS_INTERPOSED cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  cudaError_t result = real().stream_create_with_flags(stream, flags);
  if (result == cudaSuccess && (flags & cudaStreamNonBlocking) != 0 && !passthrough())
    non_blocking_streams().add(*stream);
  return result;
}

FRAGLESS_INTERPOSED cudaError_t cudaStreamCreateWithPriority(cudaStream_t* stream, unsigned int flags, int priority) {
  cudaError_t result = real().stream_create_with_priority(stream, flags, priority);
  if (result == cudaSuccess && (flags & cudaStreamNonBlocking) != 0 && !passthrough())
    non_blocking_streams().add(*stream);
  return result;
}

// Note [Stream destruction]
FRAGLESS_INTERPOSED cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!passthrough()) {
    non_blocking_streams().remove(stream);
    fragless::retire_stream(stream);
  }
  return real().stream_destroy(stream);
}

// ---- driver API ----------------------------------------------------------------------------

// Note [Stream destruction]
FRAGLESS_INTERPOSED CUresult cuStreamDestroy_v2(CUstream stream) {
  if (real().cu_stream_destroy == nullptr) return CUDA_ERROR_NOT_FOUND;
  if (!passthrough()) {
    non_blocking_streams().remove(stream);
    fragless::retire_stream(stream);
  }
  return real().cu_stream_destroy(stream);
}

FRAGLESS_INTERPOSED CUresult cuMemAlloc_v2(CUdeviceptr* pointer, size_t size) {
  if (passthrough()) return real().cu_mem_alloc(pointer, size);
  void* block = nullptr;
  const CUresult result = driver_error_of(allocate_plain(&block, size, caller::driver));
  if (pointer != nullptr) *pointer = reinterpret_cast<CUdeviceptr>(block);
  return pointer == nullptr ? CUDA_ERROR_INVALID_VALUE : result;
}

FRAGLESS_INTERPOSED CUresult cuMemFree_v2(CUdeviceptr pointer) {
  if (pointer == 0 || passthrough()) return real().cu_mem_free(pointer);
  cudaError_t error = cudaSuccess;
  switch (free_if_ours(reinterpret_cast<void*>(pointer), nullptr, /*plain_free=*/true, &error, caller::driver)) {
    case free_outcome::freed: return CUDA_SUCCESS;
    case free_outcome::failed: return driver_error_of(error);
    case free_outcome::not_ours: break;
  }
  return real().cu_mem_free(pointer);
}

FRAGLESS_INTERPOSED CUresult cuMemAllocAsync(CUdeviceptr* pointer, size_t size, CUstream stream) {
  if (passthrough()) return real().cu_mem_alloc_async(pointer, size, stream);
  void* block = nullptr;
  const CUresult result =
      driver_error_of(allocate_on(&block, size, reinterpret_cast<cudaStream_t>(stream), caller::driver));
  if (pointer != nullptr) *pointer = reinterpret_cast<CUdeviceptr>(block);
  return pointer == nullptr ? CUDA_ERROR_INVALID_VALUE : result;
}

FRAGLESS_INTERPOSED CUresult cuMemFreeAsync(CUdeviceptr pointer, CUstream stream) {
  if (pointer == 0 || passthrough()) return real().cu_mem_free_async(pointer, stream);
  cudaError_t error = cudaSuccess;
  switch (free_if_ours(reinterpret_cast<void*>(pointer), reinterpret_cast<cudaStream_t>(stream), false, &error,
                       caller::driver)) {
    case free_outcome::freed: return CUDA_SUCCESS;
    case free_outcome::failed: return driver_error_of(error);
    case free_outcome::not_ours: break;
  }
  return real().cu_mem_free_async(pointer, stream);
}

// ---- entry-point lookups -------------------------------------------------------------------
// Note [Entry points]
// Since CUDA 11.3 the runtime reaches the driver through cuGetProcAddress, and programs can
// too (cudaGetDriverEntryPoint*). A lookup of an allocation function we interpose returns
// ours; every other name returns the real driver's function.
namespace fragless::preload {
namespace {

void* interposed_driver_function(const char* symbol) {
  if (symbol == nullptr || passthrough()) return nullptr;
  if (std::strcmp(symbol, "cuMemAlloc") == 0 || std::strcmp(symbol, "cuMemAlloc_v2") == 0)
    return reinterpret_cast<void*>(&cuMemAlloc_v2);
  if (std::strcmp(symbol, "cuMemFree") == 0 || std::strcmp(symbol, "cuMemFree_v2") == 0)
    return reinterpret_cast<void*>(&cuMemFree_v2);
  if (std::strcmp(symbol, "cuMemAllocAsync") == 0) return reinterpret_cast<void*>(&cuMemAllocAsync);
  if (std::strcmp(symbol, "cuMemFreeAsync") == 0) return reinterpret_cast<void*>(&cuMemFreeAsync);
  if (std::strcmp(symbol, "cuStreamDestroy") == 0 || std::strcmp(symbol, "cuStreamDestroy_v2") == 0)
    return reinterpret_cast<void*>(&cuStreamDestroy_v2);
  return nullptr;
}

}  // namespace
}  // namespace fragless::preload

FRAGLESS_INTERPOSED CUresult cuGetProcAddress_v2(const char* symbol, void** function, int cuda_version,
                                                  cuuint64_t flags, CUdriverProcAddressQueryResult* status) {
  if (real().cu_get_proc_address == nullptr) return CUDA_ERROR_NOT_FOUND;
  const CUresult result = real().cu_get_proc_address(symbol, function, cuda_version, flags, status);
  // cuMemAlloc below version 3020 is the 32-bit v1 ABI: leave it alone.
  if (result == CUDA_SUCCESS && function != nullptr && cuda_version >= 3020) {
    if (void* ours = interposed_driver_function(symbol)) *function = ours;  // Note [Entry points]
  }
  return result;
}

FRAGLESS_INTERPOSED cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** function, unsigned long long flags,
                                                        cudaDriverEntryPointQueryResult* status) {
  const cudaError_t result = real().get_driver_entry_point(symbol, function, flags, status);
  if (result == cudaSuccess && function != nullptr && *function != nullptr) {
    if (void* ours = interposed_driver_function(symbol)) *function = ours;
  }
  return result;
}

FRAGLESS_INTERPOSED cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** function,
                                                                 unsigned int cuda_version, unsigned long long flags,
                                                                 cudaDriverEntryPointQueryResult* status) {
  const cudaError_t result = real().get_driver_entry_point_by_version(symbol, function, cuda_version, flags, status);
  if (result == cudaSuccess && function != nullptr && *function != nullptr && cuda_version >= 3020) {
    if (void* ours = interposed_driver_function(symbol)) *function = ours;
  }
  return result;
}
