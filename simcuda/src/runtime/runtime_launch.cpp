// Runtime API: kernel registration and launches (accepted, never run) and driver entry points.
// Invariant: registration hands out valid, distinct handles and never fails; launches
// complete at once (simulated kernels come from the control API instead).
//
// Note [Kernel launch entry points]
// nvcc compiles `kernel<<<grid, block, bytes, stream>>>(...)` to __cudaPushCallConfiguration
// and a host stub; since CUDA 12.x the stub asks __cudaGetKernel once for a cudaKernel_t
// handle of the function and launches with __cudaLaunchKernel (or __cudaLaunchKernel_ptsz
// under --default-stream per-thread), not cudaLaunchKernel. simcuda's handle for a kernel is
// its host stub's address; all of these launch like cudaLaunchKernel: one op on the stream,
// ordered there, that touches nothing and completes at once. A program linked with the
// static runtime (nvcc's default, -cudart static) does not use this library at all: its
// runtime asks the driver for private export tables (cuGetExportTable), which simcuda
// answers with one line telling the user to rebuild with -cudart shared.
#include <cstring>

#include "runtime_common.h"

using namespace simcuda::runtime;

namespace {

struct CallConfiguration {
  dim3 grid;
  dim3 block;
  size_t shared_bytes = 0;
  void* stream = nullptr;
};
thread_local CallConfiguration t_call_configuration;

}  // namespace

SIMCUDA_EXPORT void** CUDARTAPI __cudaRegisterFatBinary(void*) {
  static_cast<void>(simcuda_core_enter(simcuda_core_name_index(__func__)));
  simcuda_core_leave();
  return new void*(nullptr);  // a distinct handle per module, freed at unregistration
}

SIMCUDA_EXPORT void CUDARTAPI __cudaRegisterFatBinaryEnd(void**) {
  static_cast<void>(simcuda_core_enter(simcuda_core_name_index(__func__)));
  simcuda_core_leave();
}

SIMCUDA_EXPORT void CUDARTAPI __cudaUnregisterFatBinary(void** handle) {
  static_cast<void>(simcuda_core_enter(simcuda_core_name_index(__func__)));
  simcuda_core_leave();
  delete handle;
}

SIMCUDA_EXPORT void CUDARTAPI __cudaRegisterFunction(void**, const char*, char*, const char*, int, uint3*, uint3*, dim3*,
                                                     dim3*, int*) {
  static_cast<void>(simcuda_core_enter(simcuda_core_name_index(__func__)));
  simcuda_core_leave();
}

SIMCUDA_EXPORT void CUDARTAPI __cudaRegisterVar(void**, char*, char*, const char*, int, size_t, int, int) {
  static_cast<void>(simcuda_core_enter(simcuda_core_name_index(__func__)));
  simcuda_core_leave();
}

SIMCUDA_EXPORT void CUDARTAPI __cudaRegisterManagedVar(void**, void**, char*, const char*, int, size_t, int, int) {
  static_cast<void>(simcuda_core_enter(simcuda_core_name_index(__func__)));
  simcuda_core_leave();
}

SIMCUDA_EXPORT char CUDARTAPI __cudaInitModule(void**) {
  static_cast<void>(simcuda_core_enter(simcuda_core_name_index(__func__)));
  simcuda_core_leave();
  return 1;
}

SIMCUDA_EXPORT unsigned CUDARTAPI __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shared_bytes, void* stream) {
  static_cast<void>(simcuda_core_enter(simcuda_core_name_index(__func__)));
  simcuda_core_leave();
  t_call_configuration = CallConfiguration{grid, block, shared_bytes, stream};
  return 0;
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI __cudaPopCallConfiguration(dim3* grid, dim3* block, size_t* shared_bytes,
                                                                void* stream) {
  SIMCUDA_RUNTIME_ENTER();
  if (grid != nullptr) *grid = t_call_configuration.grid;
  if (block != nullptr) *block = t_call_configuration.block;
  if (shared_bytes != nullptr) *shared_bytes = t_call_configuration.shared_bytes;
  if (stream != nullptr) *static_cast<void**>(stream) = t_call_configuration.stream;
  return cudaSuccess;
}

namespace {

// One launch: an op on `stream` that touches nothing and completes at once.
cudaError_t launch(const void* function, cudaStream_t stream) {
  if (function == nullptr) return cudaErrorInvalidDeviceFunction;
  CUresult result = ensure_context();
  if (result == CUDA_SUCCESS)
    result = SIMCUDA_DRIVER(cuLaunchKernel)(nullptr, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr);
  return static_cast<cudaError_t>(result);
}

}  // namespace

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaLaunchKernel(const void* function, dim3, dim3, void**, size_t,
                                                     cudaStream_t stream) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(launch(function, stream));
}

namespace {

// Note [Kernel launch entry points]: a kernel's handle is its host stub's address.
cudaError_t kernel_handle(cudaKernel_t* kernel, const void* function) {
  if (kernel == nullptr || function == nullptr) return cudaErrorInvalidValue;
  *kernel = reinterpret_cast<cudaKernel_t>(const_cast<void*>(function));
  return cudaSuccess;
}

}  // namespace

SIMCUDA_EXPORT cudaError_t CUDARTAPI __cudaGetKernel(cudaKernel_t* kernel, const void* function) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(kernel_handle(kernel, function));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGetKernel(cudaKernel_t* kernel, const void* function) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(kernel_handle(kernel, function));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI __cudaLaunchKernel(cudaKernel_t kernel, dim3, dim3, void**, size_t,
                                                       cudaStream_t stream) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(launch(reinterpret_cast<const void*>(kernel), stream));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3, dim3, void**, size_t,
                                                            cudaStream_t stream) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(launch(reinterpret_cast<const void*>(kernel), stream != nullptr ? stream : cudaStreamPerThread));
}

namespace {

cudaError_t entry_point(const char* symbol, void** function, unsigned int cuda_version,
                        cudaDriverEntryPointQueryResult* status) {
  if (symbol == nullptr || function == nullptr) return cudaErrorInvalidValue;
  *function = simcuda_core_driver_proc(symbol, cuda_version);
  if (status != nullptr) *status = *function != nullptr ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;  // like the real runtime: a missing symbol is reported through status
}

}  // namespace

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGetDriverEntryPoint(const char* symbol, void** function, unsigned long long,
                                                            cudaDriverEntryPointQueryResult* status) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(entry_point(symbol, function, 13000, status));
}

SIMCUDA_EXPORT cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion(const char* symbol, void** function,
                                                                     unsigned int cuda_version, unsigned long long,
                                                                     cudaDriverEntryPointQueryResult* status) {
  SIMCUDA_RUNTIME_ENTER();
  return finish(entry_point(symbol, function, cuda_version, status));
}
