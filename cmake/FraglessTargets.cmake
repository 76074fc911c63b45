# Helpers shared by every fragless target.

# fragless_target_defaults(<target>): C++20, strict warnings (errors unless disabled),
# hidden visibility by default. Use on every target whose sources we own.
function(fragless_target_defaults target)
  target_compile_features(${target} PRIVATE cxx_std_20)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX,C>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion>
    $<$<AND:$<BOOL:${FRAGLESS_WARNINGS_AS_ERRORS}>,$<COMPILE_LANGUAGE:CXX,C>>:-Werror>)
  set_target_properties(${target} PROPERTIES
    CXX_VISIBILITY_PRESET hidden
    C_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
endfunction()

# The directory holding simcuda's libcudart.so.13 and libcuda.so.1 in the build tree.
set(FRAGLESS_SIMCUDA_DIR "${CMAKE_BINARY_DIR}/simcuda" CACHE INTERNAL "")

# fragless_add_test(<name> SOURCES ... [LIBS ...] [LABELS ...] [ENV k=v ...] [CASES tag ...])
# A Catch2 test executable, compiled against the real CUDA headers, linked with the
# shared runtime, and run by ctest against simcuda (LD_LIBRARY_PATH). With CASES, one
# ctest entry per Catch2 tag, <name>_<tag>, running only the cases tagged [<tag>]: for
# executables whose cases each take minutes, so that each has its own timeout and they
# run side by side.
function(fragless_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;LABELS;ENV;CASES" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  fragless_target_defaults(${name})
  target_link_libraries(${name} PRIVATE Catch2::Catch2 fragless_test_main ${ARG_LIBS})
  # One ctest entry per executable: Catch2 v2 (Debian's) discovers at build time
  # without an environment, and one process per file keeps the suite fast.
  set(tests "")
  if(ARG_CASES)
    foreach(tag IN LISTS ARG_CASES)
      add_test(NAME ${name}_${tag} COMMAND ${name} "[${tag}]")
      list(APPEND tests ${name}_${tag})
    endforeach()
  else()
    add_test(NAME ${name} COMMAND ${name})
    set(tests ${name})
  endif()
  set_tests_properties(${tests} PROPERTIES
    ENVIRONMENT "LD_LIBRARY_PATH=${FRAGLESS_SIMCUDA_DIR};${ARG_ENV}"
    LABELS "${ARG_LABELS}")
  set(${name}_TESTS ${tests} PARENT_SCOPE)
endfunction()
