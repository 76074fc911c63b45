# Finds what fragless needs from CUDA -- the runtime headers and libcudart.so, nothing else
# (no nvcc: fragless has no device code) -- and defines CUDA::cudart, CUDAToolkit_INCLUDE_DIRS
# and CUDAToolkit_LIBRARY_DIR as FindCUDAToolkit does. Two sources:
#  - a CUDA toolkit (find_package(CUDAToolkit)), the default;
#  - NVIDIA's PyPI wheels nvidia-cuda-runtime + nvidia-cuda-crt (headers in include/,
#    libcudart.so.13 in lib/ of site-packages/nvidia/cu13), which scripts/setup.sh installs
#    into .venv when no toolkit is found. Used when FRAGLESS_CUDA_FROM_WHEELS is ON (never
#    looking at a toolkit), or when no toolkit is found and the wheels are there.
# Invariant: configuration either finds both headers and runtime or stops with one line
# saying what is missing and how to get it.
option(FRAGLESS_CUDA_FROM_WHEELS "Take CUDA headers and libcudart from NVIDIA's PyPI wheels, not a toolkit" OFF)
set(FRAGLESS_CUDA_WHEEL_ROOT "" CACHE PATH
  "The wheels' nvidia/cu13 directory (default: the project's .venv, or the pip build's Python)")

if(NOT FRAGLESS_CUDA_FROM_WHEELS)
  find_package(CUDAToolkit 12 QUIET)
  if(CUDAToolkit_FOUND)
    message(STATUS "fragless: CUDA ${CUDAToolkit_VERSION} from the toolkit at ${CUDAToolkit_INCLUDE_DIRS}")
    # For scripts that run programs against the real runtime's neighbours (tests/install).
    set(FRAGLESS_CUDA_LIBRARY_DIR "${CUDAToolkit_LIBRARY_DIR}" CACHE INTERNAL "")
    return()
  endif()
endif()

if(NOT FRAGLESS_CUDA_WHEEL_ROOT)
  file(GLOB _cuda_wheel_candidates "${CMAKE_SOURCE_DIR}/.venv/lib/python3*/site-packages/nvidia/cu13")
  if(NOT _cuda_wheel_candidates AND SKBUILD)
    find_package(Python COMPONENTS Interpreter)
    if(Python_EXECUTABLE)
      execute_process(COMMAND "${Python_EXECUTABLE}" -c
          "import os, nvidia; print(os.path.join(list(nvidia.__path__)[0], 'cu13'))"
        OUTPUT_VARIABLE _cuda_wheel_candidates OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    endif()
  endif()
  if(_cuda_wheel_candidates)
    list(GET _cuda_wheel_candidates 0 _cuda_wheel_root)
    set(FRAGLESS_CUDA_WHEEL_ROOT "${_cuda_wheel_root}" CACHE PATH "" FORCE)
  endif()
endif()

set(_cudart "${FRAGLESS_CUDA_WHEEL_ROOT}/lib/libcudart.so.13")
set(_cuda_header "${FRAGLESS_CUDA_WHEEL_ROOT}/include/cuda_runtime_api.h")
set(_crt_header "${FRAGLESS_CUDA_WHEEL_ROOT}/include/crt/host_config.h")
if(NOT FRAGLESS_CUDA_WHEEL_ROOT OR NOT EXISTS "${_cudart}" OR NOT EXISTS "${_cuda_header}" OR NOT EXISTS "${_crt_header}")
  message(FATAL_ERROR "fragless: no CUDA found: install the CUDA toolkit (12 or 13), or run scripts/setup.sh "
                      "(it installs the nvidia-cuda-runtime and nvidia-cuda-crt wheels into .venv), or set "
                      "FRAGLESS_CUDA_WHEEL_ROOT to a directory with include/cuda_runtime_api.h, "
                      "include/crt/host_config.h and lib/libcudart.so.13")
endif()

file(STRINGS "${_cuda_header}" _cudart_version_line REGEX "^#define CUDART_VERSION[ \t]+[0-9]+")
string(REGEX REPLACE ".*CUDART_VERSION[ \t]+([0-9]+).*" "\\1" _cudart_version "${_cudart_version_line}")
math(EXPR _cuda_major "${_cudart_version} / 1000")
math(EXPR _cuda_minor "(${_cudart_version} % 1000) / 10")
set(CUDAToolkit_VERSION "${_cuda_major}.${_cuda_minor}")
set(CUDAToolkit_INCLUDE_DIRS "${FRAGLESS_CUDA_WHEEL_ROOT}/include")
set(CUDAToolkit_LIBRARY_DIR "${FRAGLESS_CUDA_WHEEL_ROOT}/lib")
set(CUDAToolkit_FOUND TRUE)
set(FRAGLESS_CUDA_LIBRARY_DIR "${CUDAToolkit_LIBRARY_DIR}" CACHE INTERNAL "")
add_library(CUDA::cudart SHARED IMPORTED GLOBAL)
set_target_properties(CUDA::cudart PROPERTIES
  IMPORTED_LOCATION "${_cudart}"
  INTERFACE_INCLUDE_DIRECTORIES "${CUDAToolkit_INCLUDE_DIRS}")
message(STATUS "fragless: CUDA ${CUDAToolkit_VERSION} from NVIDIA's wheels at ${FRAGLESS_CUDA_WHEEL_ROOT}")
