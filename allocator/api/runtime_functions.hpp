// For the LD_PRELOAD interposer (hooks/preload) only: it defines cudaMalloc, cudaFree and
// cudaMemGetInfo itself, so before the global allocator starts it hands the real
// runtime's functions over, and the CUDA backend calls those instead of recursing into the
// interposer (Note [Interposed runtime functions] in backend/backend.hpp). Keeps the
// hooks on the api layer, off the private backend. Not exported from libfragless.so
// (hidden visibility). Invariant: a null pointer keeps the backend's direct call.
#pragma once

namespace fragless::api {

// The runtime's own signatures, type-erased: cudaError_t (*)(void**, size_t),
// cudaError_t (*)(void*), cudaError_t (*)(size_t*, size_t*).
void use_real_runtime_functions(void* malloc_function, void* free_function, void* mem_get_info_function) noexcept;

}  // namespace fragless::api
