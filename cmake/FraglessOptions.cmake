# Build options for fragless. Every option a user can set is here.
option(FRAGLESS_BUILD_TESTS "Build the Catch2 test suite" ON)
# Off for consumers (a newer compiler's new warning must not break their build); the
# project's presets and CI turn it on.
option(FRAGLESS_WARNINGS_AS_ERRORS "Treat warnings as errors on fragless's own targets" OFF)
set(FRAGLESS_SANITIZER "" CACHE STRING "Sanitizer build: '', address, undefined, address,undefined, thread")
set_property(CACHE FRAGLESS_SANITIZER PROPERTY STRINGS "" address undefined "address,undefined" thread)

if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE RelWithDebInfo CACHE STRING "Build type" FORCE)
endif()

set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CXX_EXTENSIONS OFF)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
set(CMAKE_EXPORT_COMPILE_COMMANDS ON)
# RUNPATH (not RPATH) so LD_LIBRARY_PATH can select simcuda over the real CUDA runtime.
add_link_options("LINKER:--enable-new-dtags")

if(FRAGLESS_SANITIZER)
  set(_fragless_san_flags "-fsanitize=${FRAGLESS_SANITIZER}" -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_compile_options(${_fragless_san_flags})
  add_link_options(${_fragless_san_flags})
  # GCC warns that TSan does not model std::atomic_thread_fence (the stats seqlock and
  # libstdc++ use it); the warning would stop every -Werror target of the thread preset.
  if(FRAGLESS_SANITIZER STREQUAL "thread")
    add_compile_options(-Wno-tsan)
  endif()
endif()

# Installed programs find the installed libraries next to them.
set(CMAKE_INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
