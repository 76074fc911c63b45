// libfragless_bench_counting.so: the benchmark's device-call counter for any CUDA driver.
// fragless-bench LD_PRELOADs it into a replay child when simcuda's control API is absent (a
// real GPU) or FRAGLESS_BENCH_COUNTING=interposer forces it (Note [Counting device calls]
// in replay/device_counters.hpp). Each wrapper counts one call and forwards it unchanged to
// the real function; the entry-point getters hand out counting wrappers for the counted
// driver functions, since fragless and PyTorch reach the driver that way.
// Invariant: a counted function is counted once per call the program makes, whichever way
// it was reached (its export or an entry-point lookup), under the name simcuda's
// simcuda_call_count uses for it; return values and errors are the real function's.
// Exports only the wrapped CUDA functions and fragless_bench_counting_* (counting.map.in).
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#define FRAGLESS_COUNTED extern "C" __attribute__((visibility("default")))

#ifndef FRAGLESS_CUDART_VERSION_NODE
#define FRAGLESS_CUDART_VERSION_NODE "libcudart.so.13"
#endif

namespace {

enum counted : std::size_t {
  cuda_malloc,
  cuda_free,
  cuda_malloc_async,
  cuda_free_async,
  cuda_device_synchronize,
  cuda_stream_synchronize,
  cuda_event_synchronize,
  cuda_event_record,
  cuda_stream_wait_event,
  cuda_event_query,
  cu_mem_create,
  cu_mem_release,
  cu_mem_alloc_v2,
  cu_mem_free_v2,
  cu_mem_alloc_async,
  cu_mem_free_async,
  cu_mem_map,
  cu_mem_unmap,
  cu_mem_set_access,
  cu_mem_address_reserve,
  cu_mem_address_free,
  cu_ctx_synchronize,
  cu_ctx_synchronize_v2,
  cu_stream_synchronize,
  cu_event_synchronize,
  counted_count
};

struct counted_function {
  const char* export_name;  // the library's export, and the name calls are counted under
  const char* lookup_name;  // the name an entry-point lookup asks for (driver functions)
  bool runtime;             // libcudart (else libcuda)
  bool changes_memory;      // can change the device memory in use (Note [Memory generation])
  int min_version;          // entry-point lookups: the versions that return this variant
  int max_version;
  bool has_per_thread_variant;  // a per-thread-stream lookup returns a _ptsz variant (not counted)
};

constexpr counted_function functions[counted_count] = {
    {"cudaMalloc", nullptr, true, true, 0, 0, false},
    {"cudaFree", nullptr, true, true, 0, 0, false},
    {"cudaMallocAsync", nullptr, true, true, 0, 0, false},
    {"cudaFreeAsync", nullptr, true, true, 0, 0, false},
    {"cudaDeviceSynchronize", nullptr, true, false, 0, 0, false},
    {"cudaStreamSynchronize", nullptr, true, false, 0, 0, false},
    {"cudaEventSynchronize", nullptr, true, false, 0, 0, false},
    {"cudaEventRecord", nullptr, true, false, 0, 0, false},
    {"cudaStreamWaitEvent", nullptr, true, false, 0, 0, false},
    {"cudaEventQuery", nullptr, true, false, 0, 0, false},
    {"cuMemCreate", "cuMemCreate", false, true, 0, INT_MAX, false},
    {"cuMemRelease", "cuMemRelease", false, true, 0, INT_MAX, false},
    {"cuMemAlloc_v2", "cuMemAlloc", false, true, 3020, INT_MAX, false},
    {"cuMemFree_v2", "cuMemFree", false, true, 3020, INT_MAX, false},
    {"cuMemAllocAsync", "cuMemAllocAsync", false, true, 0, INT_MAX, true},
    {"cuMemFreeAsync", "cuMemFreeAsync", false, true, 0, INT_MAX, true},
    {"cuMemMap", "cuMemMap", false, true, 0, INT_MAX, false},
    {"cuMemUnmap", "cuMemUnmap", false, true, 0, INT_MAX, false},
    {"cuMemSetAccess", "cuMemSetAccess", false, false, 0, INT_MAX, false},
    {"cuMemAddressReserve", "cuMemAddressReserve", false, false, 0, INT_MAX, false},
    {"cuMemAddressFree", "cuMemAddressFree", false, false, 0, INT_MAX, false},
    {"cuCtxSynchronize", "cuCtxSynchronize", false, false, 0, 12999, false},
    {"cuCtxSynchronize_v2", "cuCtxSynchronize", false, false, 13000, INT_MAX, false},
    {"cuStreamSynchronize", "cuStreamSynchronize", false, false, 0, INT_MAX, true},
    {"cuEventSynchronize", "cuEventSynchronize", false, false, 0, INT_MAX, false},
};

std::atomic<std::uint64_t> call_counts[counted_count];
// Note [Memory generation] (replay/device_counters.hpp): never reset.
std::atomic<std::uint64_t> memory_calls{0};
std::atomic<void*> real_functions[counted_count];

// Note [Finding the real functions]
// Runtime functions: dlvsym(RTLD_NEXT, name, the runtime's version node), then plain
// dlsym(RTLD_NEXT). Driver functions: dlsym(RTLD_NEXT), then the handle of libcuda.so.1
// (the runtime may have loaded it privately, or not yet). Resolved at first use; a race
// between two threads stores the same pointer twice.
void* driver_symbol(const char* name) {
  if (void* symbol = dlsym(RTLD_NEXT, name)) return symbol;
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (library == nullptr) library = dlopen("libcuda.so.1", RTLD_NOW);
  return library == nullptr ? nullptr : dlsym(library, name);
}

void* real_of(counted f) {
  void* real = real_functions[f].load(std::memory_order_acquire);
  if (real != nullptr) return real;
  const counted_function& info = functions[f];
  if (info.runtime) {
    real = dlvsym(RTLD_NEXT, info.export_name, FRAGLESS_CUDART_VERSION_NODE);
    if (real == nullptr) real = dlsym(RTLD_NEXT, info.export_name);
  } else {
    real = driver_symbol(info.export_name);
  }
  real_functions[f].store(real, std::memory_order_release);
  return real;
}

template <typename Result>
Result not_found() {
  if constexpr (std::is_same_v<Result, cudaError_t>) {
    return cudaErrorNotSupported;
  } else {
    return CUDA_ERROR_NOT_FOUND;
  }
}

// Hot path of every wrapper: count, then call the real function.
template <counted F, typename Result, typename... Arguments>
Result count_and_forward(Arguments... arguments) {
  call_counts[F].fetch_add(1, std::memory_order_relaxed);
  if (functions[F].changes_memory) memory_calls.fetch_add(1, std::memory_order_relaxed);
  auto real = reinterpret_cast<Result (*)(Arguments...)>(real_of(F));
  if (real == nullptr) return not_found<Result>();
  return real(arguments...);
}

void* wrapper_of(counted f);

// Note [Counting wrappers for entry points]
// A lookup of a counted driver function returns our wrapper of the variant the driver
// returned: first by identity (the pointer the driver gave is that variant's export, as on
// simcuda), else by the documented version rules (cuMemAlloc/cuMemFree are _v2 from 3020 on,
// cuCtxSynchronize is _v2 from 13000 on). Per-thread-stream (_ptsz) variants are left alone:
// simcuda counts them under their own names, which the benchmark does not add up either.
// FRAGLESS_BENCH_COUNTING_BY_VERSION=1 skips the identity match, so that the version rules
// (what a real driver whose entry points are not its exports relies on) are tested on simcuda.
bool match_by_version_only() {
  static const bool only = [] {
    const char* value = std::getenv("FRAGLESS_BENCH_COUNTING_BY_VERSION");
    return value != nullptr && std::strcmp(value, "1") == 0;
  }();
  return only;
}

void* counting_wrapper_for(const char* symbol, void* returned, int cuda_version, bool per_thread) {
  if (symbol == nullptr || returned == nullptr) return nullptr;
  for (std::size_t i = 0; i < counted_count && !match_by_version_only(); ++i) {
    const counted f = static_cast<counted>(i);
    if (functions[f].lookup_name == nullptr || std::strcmp(functions[f].lookup_name, symbol) != 0) continue;
    if (returned == real_of(f)) return wrapper_of(f);
  }
  for (std::size_t i = 0; i < counted_count; ++i) {
    const counted f = static_cast<counted>(i);
    const counted_function& info = functions[f];
    if (info.lookup_name == nullptr || std::strcmp(info.lookup_name, symbol) != 0) continue;
    if (per_thread && info.has_per_thread_variant) return nullptr;
    if (cuda_version >= info.min_version && cuda_version <= info.max_version) {
      // Forward to what the driver handed out when its export could not be found.
      void* expected = nullptr;
      real_functions[f].compare_exchange_strong(expected, returned, std::memory_order_acq_rel);
      return wrapper_of(f);
    }
  }
  return nullptr;
}

int runtime_version() {
  static const int version = [] {
    int value = 0;
    void* symbol = dlvsym(RTLD_NEXT, "cudaRuntimeGetVersion", FRAGLESS_CUDART_VERSION_NODE);
    if (symbol == nullptr) symbol = dlsym(RTLD_NEXT, "cudaRuntimeGetVersion");
    if (symbol == nullptr || reinterpret_cast<cudaError_t (*)(int*)>(symbol)(&value) != cudaSuccess) value = CUDART_VERSION;
    return value;
  }();
  return version;
}

}  // namespace

// ---- the counted runtime functions ------------------------------------------------------------
FRAGLESS_COUNTED cudaError_t cudaMalloc(void** pointer, size_t bytes) {
  return count_and_forward<cuda_malloc, cudaError_t>(pointer, bytes);
}
FRAGLESS_COUNTED cudaError_t cudaFree(void* pointer) { return count_and_forward<cuda_free, cudaError_t>(pointer); }
FRAGLESS_COUNTED cudaError_t cudaMallocAsync(void** pointer, size_t bytes, cudaStream_t stream) {
  return count_and_forward<cuda_malloc_async, cudaError_t>(pointer, bytes, stream);
}
FRAGLESS_COUNTED cudaError_t cudaFreeAsync(void* pointer, cudaStream_t stream) {
  return count_and_forward<cuda_free_async, cudaError_t>(pointer, stream);
}
FRAGLESS_COUNTED cudaError_t cudaDeviceSynchronize(void) {
  return count_and_forward<cuda_device_synchronize, cudaError_t>();
}
FRAGLESS_COUNTED cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  return count_and_forward<cuda_stream_synchronize, cudaError_t>(stream);
}
FRAGLESS_COUNTED cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  return count_and_forward<cuda_event_synchronize, cudaError_t>(event);
}
// Stream ordering, priced by the cost model (Note [Cost model] in cost/cost_table.hpp).
FRAGLESS_COUNTED cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  return count_and_forward<cuda_event_record, cudaError_t>(event, stream);
}
FRAGLESS_COUNTED cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  return count_and_forward<cuda_stream_wait_event, cudaError_t>(stream, event, flags);
}
FRAGLESS_COUNTED cudaError_t cudaEventQuery(cudaEvent_t event) { return count_and_forward<cuda_event_query, cudaError_t>(event); }

// ---- the counted driver functions -------------------------------------------------------------
FRAGLESS_COUNTED CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t bytes,
                                      const CUmemAllocationProp* prop, unsigned long long flags) {
  return count_and_forward<cu_mem_create, CUresult>(handle, bytes, prop, flags);
}
FRAGLESS_COUNTED CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  return count_and_forward<cu_mem_release, CUresult>(handle);
}
FRAGLESS_COUNTED CUresult cuMemAlloc_v2(CUdeviceptr* pointer, size_t bytes) {
  return count_and_forward<cu_mem_alloc_v2, CUresult>(pointer, bytes);
}
FRAGLESS_COUNTED CUresult cuMemFree_v2(CUdeviceptr pointer) { return count_and_forward<cu_mem_free_v2, CUresult>(pointer); }
FRAGLESS_COUNTED CUresult cuMemAllocAsync(CUdeviceptr* pointer, size_t bytes, CUstream stream) {
  return count_and_forward<cu_mem_alloc_async, CUresult>(pointer, bytes, stream);
}
FRAGLESS_COUNTED CUresult cuMemFreeAsync(CUdeviceptr pointer, CUstream stream) {
  return count_and_forward<cu_mem_free_async, CUresult>(pointer, stream);
}
FRAGLESS_COUNTED CUresult cuMemMap(CUdeviceptr pointer, size_t bytes, size_t offset, CUmemGenericAllocationHandle handle,
                                   unsigned long long flags) {
  return count_and_forward<cu_mem_map, CUresult>(pointer, bytes, offset, handle, flags);
}
FRAGLESS_COUNTED CUresult cuMemUnmap(CUdeviceptr pointer, size_t bytes) {
  return count_and_forward<cu_mem_unmap, CUresult>(pointer, bytes);
}
FRAGLESS_COUNTED CUresult cuMemSetAccess(CUdeviceptr pointer, size_t bytes, const CUmemAccessDesc* descriptors,
                                         size_t count) {
  return count_and_forward<cu_mem_set_access, CUresult>(pointer, bytes, descriptors, count);
}
FRAGLESS_COUNTED CUresult cuMemAddressReserve(CUdeviceptr* pointer, size_t bytes, size_t alignment, CUdeviceptr address,
                                              unsigned long long flags) {
  return count_and_forward<cu_mem_address_reserve, CUresult>(pointer, bytes, alignment, address, flags);
}
FRAGLESS_COUNTED CUresult cuMemAddressFree(CUdeviceptr pointer, size_t bytes) {
  return count_and_forward<cu_mem_address_free, CUresult>(pointer, bytes);
}
FRAGLESS_COUNTED CUresult cuCtxSynchronize(void) { return count_and_forward<cu_ctx_synchronize, CUresult>(); }
FRAGLESS_COUNTED CUresult cuCtxSynchronize_v2(CUcontext context) {
  return count_and_forward<cu_ctx_synchronize_v2, CUresult>(context);
}
FRAGLESS_COUNTED CUresult cuStreamSynchronize(CUstream stream) {
  return count_and_forward<cu_stream_synchronize, CUresult>(stream);
}
FRAGLESS_COUNTED CUresult cuEventSynchronize(CUevent event) {
  return count_and_forward<cu_event_synchronize, CUresult>(event);
}

namespace {

void* wrapper_of(counted f) {
  switch (f) {
    case cuda_malloc: return reinterpret_cast<void*>(&cudaMalloc);
    case cuda_free: return reinterpret_cast<void*>(&cudaFree);
    case cuda_malloc_async: return reinterpret_cast<void*>(&cudaMallocAsync);
    case cuda_free_async: return reinterpret_cast<void*>(&cudaFreeAsync);
    case cuda_device_synchronize: return reinterpret_cast<void*>(&cudaDeviceSynchronize);
    case cuda_stream_synchronize: return reinterpret_cast<void*>(&cudaStreamSynchronize);
    case cuda_event_synchronize: return reinterpret_cast<void*>(&cudaEventSynchronize);
    case cuda_event_record: return reinterpret_cast<void*>(&cudaEventRecord);
    case cuda_stream_wait_event: return reinterpret_cast<void*>(&cudaStreamWaitEvent);
    case cuda_event_query: return reinterpret_cast<void*>(&cudaEventQuery);
    case cu_mem_create: return reinterpret_cast<void*>(&cuMemCreate);
    case cu_mem_release: return reinterpret_cast<void*>(&cuMemRelease);
    case cu_mem_alloc_v2: return reinterpret_cast<void*>(&cuMemAlloc_v2);
    case cu_mem_free_v2: return reinterpret_cast<void*>(&cuMemFree_v2);
    case cu_mem_alloc_async: return reinterpret_cast<void*>(&cuMemAllocAsync);
    case cu_mem_free_async: return reinterpret_cast<void*>(&cuMemFreeAsync);
    case cu_mem_map: return reinterpret_cast<void*>(&cuMemMap);
    case cu_mem_unmap: return reinterpret_cast<void*>(&cuMemUnmap);
    case cu_mem_set_access: return reinterpret_cast<void*>(&cuMemSetAccess);
    case cu_mem_address_reserve: return reinterpret_cast<void*>(&cuMemAddressReserve);
    case cu_mem_address_free: return reinterpret_cast<void*>(&cuMemAddressFree);
    case cu_ctx_synchronize: return reinterpret_cast<void*>(&cuCtxSynchronize);
    case cu_ctx_synchronize_v2: return reinterpret_cast<void*>(&cuCtxSynchronize_v2);
    case cu_stream_synchronize: return reinterpret_cast<void*>(&cuStreamSynchronize);
    case cu_event_synchronize: return reinterpret_cast<void*>(&cuEventSynchronize);
    case counted_count: break;
  }
  return nullptr;
}

}  // namespace

// ---- entry-point lookups (Note [Counting wrappers for entry points]) --------------------------
FRAGLESS_COUNTED CUresult cuGetProcAddress_v2(const char* symbol, void** function, int cuda_version, cuuint64_t flags,
                                              CUdriverProcAddressQueryResult* status) {
  using getter = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  static const auto real = reinterpret_cast<getter>(driver_symbol("cuGetProcAddress_v2"));
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  const CUresult result = real(symbol, function, cuda_version, flags, status);
  if (result == CUDA_SUCCESS && function != nullptr) {
    const bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    if (void* ours = counting_wrapper_for(symbol, *function, cuda_version, per_thread)) *function = ours;
  }
  return result;
}

FRAGLESS_COUNTED cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** function, unsigned long long flags,
                                                     cudaDriverEntryPointQueryResult* status) {
  using getter = cudaError_t (*)(const char*, void**, unsigned long long, cudaDriverEntryPointQueryResult*);
  static const auto real = [] {
    void* found = dlvsym(RTLD_NEXT, "cudaGetDriverEntryPoint", FRAGLESS_CUDART_VERSION_NODE);
    return reinterpret_cast<getter>(found != nullptr ? found : dlsym(RTLD_NEXT, "cudaGetDriverEntryPoint"));
  }();
  if (real == nullptr) return cudaErrorNotSupported;
  const cudaError_t result = real(symbol, function, flags, status);
  if (result == cudaSuccess && function != nullptr) {
    const bool per_thread = (flags & cudaEnablePerThreadDefaultStream) != 0;
    if (void* ours = counting_wrapper_for(symbol, *function, runtime_version(), per_thread)) *function = ours;
  }
  return result;
}

FRAGLESS_COUNTED cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** function,
                                                              unsigned int cuda_version, unsigned long long flags,
                                                              cudaDriverEntryPointQueryResult* status) {
  using getter = cudaError_t (*)(const char*, void**, unsigned int, unsigned long long, cudaDriverEntryPointQueryResult*);
  static const auto real = [] {
    void* found = dlvsym(RTLD_NEXT, "cudaGetDriverEntryPointByVersion", FRAGLESS_CUDART_VERSION_NODE);
    return reinterpret_cast<getter>(found != nullptr ? found : dlsym(RTLD_NEXT, "cudaGetDriverEntryPointByVersion"));
  }();
  if (real == nullptr) return cudaErrorNotSupported;
  const cudaError_t result = real(symbol, function, cuda_version, flags, status);
  if (result == cudaSuccess && function != nullptr) {
    const bool per_thread = (flags & cudaEnablePerThreadDefaultStream) != 0;
    if (void* ours = counting_wrapper_for(symbol, *function, static_cast<int>(cuda_version), per_thread)) *function = ours;
  }
  return result;
}

// ---- the counter API (read by bench/replay/device_counters.cpp through dlsym) ----------------
// Calls of one function since the last reset, by its export name (0 for a name not counted).
FRAGLESS_COUNTED std::uint64_t fragless_bench_counting_calls(const char* function_name) {
  if (function_name == nullptr) return 0;
  for (std::size_t i = 0; i < counted_count; ++i) {
    if (std::strcmp(functions[i].export_name, function_name) == 0) return call_counts[i].load(std::memory_order_relaxed);
  }
  return 0;
}

FRAGLESS_COUNTED void fragless_bench_counting_reset(void) {
  for (std::atomic<std::uint64_t>& count : call_counts) count.store(0, std::memory_order_relaxed);
}

// Calls that may have changed the device memory in use, since the process started.
FRAGLESS_COUNTED std::uint64_t fragless_bench_counting_memory_calls(void) {
  return memory_calls.load(std::memory_order_relaxed);
}
