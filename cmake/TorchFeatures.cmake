# Compile-time detection of the c10 allocator API differences between torch 2.11 and 2.15
# (Note [Torch versions] in hooks/torch/torch_allocator.hpp). Each check compiles a few
# lines against the torch headers found by TorchWheel.cmake and becomes a 0/1 definition
# in FRAGLESS_TORCH_FEATURE_DEFINITIONS, which the torch-dependent targets use:
#   FRAGLESS_TORCH_HAS_OOM_REJECTIONS        DeviceStats::num_oom_rejections
#   FRAGLESS_TORCH_HAS_OOM_REJECTION_OBSERVER OomRejectionObserver, attachOomRejectionObserver
#   FRAGLESS_TORCH_HAS_CAPTURE_MARKS         virtual CUDAAllocator::markCaptureBegin/End
#   FRAGLESS_TORCH_HAS_ANNOTATE_ENTRY        TraceEntry::ANNOTATE
#   FRAGLESS_TORCH_HAS_CONTEXT_FOR_POINTER   virtual CUDAAllocator::getContextForPointer
#   FRAGLESS_TORCH_HAS_USER_METADATA_SUPPORT virtual CUDAAllocator::supportsUserMetadata
# Invariant: the results belong to the torch headers they were computed from; a different
# FRAGLESS_TORCH_DIR or version recomputes them.
include(CheckCXXSourceCompiles)
include(CMakePushCheckState)

set(_fragless_torch_features
  OOM_REJECTIONS OOM_REJECTION_OBSERVER CAPTURE_MARKS ANNOTATE_ENTRY CONTEXT_FOR_POINTER
  USER_METADATA_SUPPORT)
set(_fragless_torch_features_key "${FRAGLESS_TORCH_DIR}@${FRAGLESS_TORCH_VERSION}")
if(NOT "${_FRAGLESS_TORCH_FEATURES_KEY}" STREQUAL "${_fragless_torch_features_key}")
  foreach(feature ${_fragless_torch_features})
    unset(FRAGLESS_TORCH_HAS_${feature} CACHE)
  endforeach()
  set(_FRAGLESS_TORCH_FEATURES_KEY "${_fragless_torch_features_key}" CACHE INTERNAL "")
endif()

cmake_push_check_state(RESET)
set(CMAKE_REQUIRED_QUIET ON)
# Compile only: the probes declare, they never run or link against c10.
set(_saved_target_type "${CMAKE_TRY_COMPILE_TARGET_TYPE}")
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
set(CMAKE_REQUIRED_INCLUDES "${FRAGLESS_TORCH_DIR}/include" ${CUDAToolkit_INCLUDE_DIRS})
set(CMAKE_REQUIRED_DEFINITIONS -D_GLIBCXX_USE_CXX11_ABI=1)
set(_allocator_header "#include <c10/cuda/CUDACachingAllocator.h>\nnamespace ca = c10::cuda::CUDACachingAllocator;\n")
check_cxx_source_compiles("${_allocator_header}
int main() { c10::CachingDeviceAllocator::DeviceStats stats; return static_cast<int>(stats.num_oom_rejections); }"
  FRAGLESS_TORCH_HAS_OOM_REJECTIONS)
check_cxx_source_compiles("${_allocator_header}
struct probe : ca::CUDAAllocator { void attachOomRejectionObserver(ca::OomRejectionObserver) override {} };
int main() { return 0; }"
  FRAGLESS_TORCH_HAS_OOM_REJECTION_OBSERVER)
check_cxx_source_compiles("${_allocator_header}
struct probe : ca::CUDAAllocator {
  void markCaptureBegin(c10::DeviceIndex) override {}
  void markCaptureEnd(c10::DeviceIndex) override {}
};
int main() { return 0; }"
  FRAGLESS_TORCH_HAS_CAPTURE_MARKS)
check_cxx_source_compiles("${_allocator_header}
int main() { return static_cast<int>(c10::CachingDeviceAllocator::TraceEntry::ANNOTATE); }"
  FRAGLESS_TORCH_HAS_ANNOTATE_ENTRY)
check_cxx_source_compiles("${_allocator_header}
struct probe : ca::CUDAAllocator {
  std::shared_ptr<c10::GatheredContext> getContextForPointer(const void*) override { return nullptr; }
};
int main() { return 0; }"
  FRAGLESS_TORCH_HAS_CONTEXT_FOR_POINTER)
check_cxx_source_compiles("${_allocator_header}
struct probe : ca::CUDAAllocator { bool supportsUserMetadata() override { return true; } };
int main() { return 0; }"
  FRAGLESS_TORCH_HAS_USER_METADATA_SUPPORT)
cmake_pop_check_state()
set(CMAKE_TRY_COMPILE_TARGET_TYPE "${_saved_target_type}")

set(FRAGLESS_TORCH_FEATURE_DEFINITIONS "")
set(_present "")
set(_absent "")
foreach(feature ${_fragless_torch_features})
  if(FRAGLESS_TORCH_HAS_${feature})
    list(APPEND FRAGLESS_TORCH_FEATURE_DEFINITIONS FRAGLESS_TORCH_HAS_${feature}=1)
    list(APPEND _present ${feature})
  else()
    list(APPEND FRAGLESS_TORCH_FEATURE_DEFINITIONS FRAGLESS_TORCH_HAS_${feature}=0)
    list(APPEND _absent ${feature})
  endif()
endforeach()
string(REPLACE ";" " " _present "${_present}")
string(REPLACE ";" " " _absent "${_absent}")
message(STATUS "fragless: torch ${FRAGLESS_TORCH_VERSION} API: has [${_present}], lacks [${_absent}]")
