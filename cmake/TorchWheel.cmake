# Locates an installed torch package (a wheel's torch/ directory) and defines
#   fragless::c10        libc10.so + torch/include
#   fragless::c10_cuda   libc10_cuda.so (links libcudart.so.13)
# FRAGLESS_TORCH_FOUND tells whether they exist; FRAGLESS_TORCH_VERSION is the version the
# headers declare. The torch is, in order: FRAGLESS_TORCH_DIR; the torch importable by the
# Python that runs a pip build (scikit-build-core); the project's .venv (scripts/setup.sh,
# pinned in scripts/pins.env); FRAGLESS_TORCH_DIR=none builds without torch. Supported: torch 2.11 to 2.15 (cmake/TorchFeatures.cmake
# detects the API differences).
set(FRAGLESS_TORCH_DIR "" CACHE PATH "Directory of the installed torch package (contains lib/ and include/)")
if(NOT FRAGLESS_TORCH_DIR AND SKBUILD)
  # A pip build: the torch of the environment pip installs into (build isolation off).
  find_package(Python COMPONENTS Interpreter)
  if(Python_EXECUTABLE)
    execute_process(
      COMMAND "${Python_EXECUTABLE}" -c "import os, torch; print(os.path.dirname(torch.__file__))"
      OUTPUT_VARIABLE _torch_dir OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _torch_rc ERROR_QUIET)
    if(_torch_rc EQUAL 0 AND _torch_dir)
      set(FRAGLESS_TORCH_DIR "${_torch_dir}" CACHE PATH "" FORCE)
    endif()
  endif()
endif()
if(NOT FRAGLESS_TORCH_DIR)
  file(GLOB _torch_candidates "${CMAKE_SOURCE_DIR}/.venv/lib/python3*/site-packages/torch")
  if(_torch_candidates)
    list(GET _torch_candidates 0 _torch_dir)
    set(FRAGLESS_TORCH_DIR "${_torch_dir}" CACHE PATH "" FORCE)
  endif()
endif()

set(FRAGLESS_TORCH_FOUND OFF)
set(FRAGLESS_TORCH_VERSION "")
set(_torch_version_header "${FRAGLESS_TORCH_DIR}/include/torch/headeronly/version.h")
# "none" given on the command line reaches a PATH cache entry made absolute (<dir>/none).
if(FRAGLESS_TORCH_DIR MATCHES "(^|/)none$")
  message(STATUS "fragless: built without torch (FRAGLESS_TORCH_DIR=none); c10 targets are skipped")
elseif(FRAGLESS_TORCH_DIR AND EXISTS "${FRAGLESS_TORCH_DIR}/lib/libc10_cuda.so" AND EXISTS "${_torch_version_header}")
  file(STRINGS "${_torch_version_header}" _torch_version_lines REGEX "^#define TORCH_VERSION_(MAJOR|MINOR|PATCH) ")
  foreach(part MAJOR MINOR PATCH)
    string(REGEX REPLACE ".*#define TORCH_VERSION_${part} ([0-9]+).*" "\\1" _torch_${part} "${_torch_version_lines}")
  endforeach()
  set(FRAGLESS_TORCH_VERSION "${_torch_MAJOR}.${_torch_MINOR}.${_torch_PATCH}")
  if(FRAGLESS_TORCH_VERSION VERSION_LESS 2.11)
    message(WARNING "fragless: torch ${FRAGLESS_TORCH_VERSION} at ${FRAGLESS_TORCH_DIR} is older than 2.11, "
                    "the oldest supported; the torch targets are skipped")
  else()
    set(FRAGLESS_TORCH_FOUND ON)
  endif()
elseif(FRAGLESS_TORCH_DIR)
  message(WARNING "fragless: ${FRAGLESS_TORCH_DIR} is not a CUDA torch package (no lib/libc10_cuda.so "
                  "or include/torch/headeronly/version.h); the torch targets are skipped")
endif()

if(FRAGLESS_TORCH_FOUND)
  add_library(fragless::c10 SHARED IMPORTED GLOBAL)
  set_target_properties(fragless::c10 PROPERTIES
    IMPORTED_LOCATION "${FRAGLESS_TORCH_DIR}/lib/libc10.so"
    INTERFACE_INCLUDE_DIRECTORIES "${FRAGLESS_TORCH_DIR}/include"
    # The wheel is built with the C++11 ABI; say so explicitly for the headers.
    INTERFACE_COMPILE_DEFINITIONS "_GLIBCXX_USE_CXX11_ABI=1")
  add_library(fragless::c10_cuda SHARED IMPORTED GLOBAL)
  set_target_properties(fragless::c10_cuda PROPERTIES
    IMPORTED_LOCATION "${FRAGLESS_TORCH_DIR}/lib/libc10_cuda.so"
    INTERFACE_LINK_LIBRARIES "fragless::c10;CUDA::cudart")
  message(STATUS "fragless: torch ${FRAGLESS_TORCH_VERSION} at ${FRAGLESS_TORCH_DIR}")
  include(TorchFeatures)
elseif(NOT FRAGLESS_TORCH_DIR)
  message(STATUS "fragless: torch not found (run scripts/setup.sh, or set FRAGLESS_TORCH_DIR); c10 targets are skipped")
endif()
