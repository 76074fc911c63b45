# Locates the pinned torch wheel installed by scripts/setup.sh in .venv and defines
#   fragless::c10        libc10.so + torch/include
#   fragless::c10_cuda   libc10_cuda.so (links libcudart.so.13)
# FRAGLESS_TORCH_FOUND tells whether they exist. The pin lives in scripts/pins.env.
file(STRINGS "${CMAKE_SOURCE_DIR}/scripts/pins.env" _pin REGEX "^TORCH_VERSION=")
string(REPLACE "TORCH_VERSION=" "" FRAGLESS_TORCH_VERSION "${_pin}")

set(FRAGLESS_TORCH_DIR "" CACHE PATH "Directory of the installed torch package (contains lib/ and include/)")
if(NOT FRAGLESS_TORCH_DIR)
  file(GLOB _torch_candidates "${CMAKE_SOURCE_DIR}/.venv/lib/python3*/site-packages/torch")
  if(_torch_candidates)
    list(GET _torch_candidates 0 _torch_dir)
    set(FRAGLESS_TORCH_DIR "${_torch_dir}" CACHE PATH "" FORCE)
  endif()
endif()

set(FRAGLESS_TORCH_FOUND OFF)
if(FRAGLESS_TORCH_DIR AND EXISTS "${FRAGLESS_TORCH_DIR}/lib/libc10_cuda.so")
  set(FRAGLESS_TORCH_FOUND ON)
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
  message(STATUS "fragless: torch wheel ${FRAGLESS_TORCH_VERSION} at ${FRAGLESS_TORCH_DIR}")
else()
  message(STATUS "fragless: torch wheel not found (run scripts/setup.sh); c10 targets are skipped")
endif()
