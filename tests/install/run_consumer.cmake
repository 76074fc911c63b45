# ctest driver: install, configure + build the consumer against the install, run it.
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${what}: ok")
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

run_step("install" ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")
foreach(expected include/fragless/fragless.h include/fragless/fragless.hpp lib/cmake/fragless/fraglessConfig.cmake
                 bin/fragless-stats bin/fragless-bench lib/libfragless_preload.so)
  if(NOT EXISTS "${prefix}/${expected}")
    message(FATAL_ERROR "install is missing ${expected}")
  endif()
endforeach()
set(san_flags "")
if(SANITIZER)
  set(san_flags "-DCMAKE_CXX_FLAGS=-fsanitize=${SANITIZER}" "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=${SANITIZER}")
endif()
run_step("configure consumer" ${CMAKE_COMMAND} -S "${CONSUMER_DIR}" -B "${WORK_DIR}/build"
  -G "${GENERATOR}" "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" "-DCMAKE_PREFIX_PATH=${prefix}" ${san_flags})
run_step("build consumer" ${CMAKE_COMMAND} --build "${WORK_DIR}/build")
run_step("run consumer" ${CMAKE_COMMAND} -E env "LD_LIBRARY_PATH=${SIMCUDA_DIR}"
  "${WORK_DIR}/build/fragless_consumer")
if(NOT last_output MATCHES "consumer: ok")
  message(FATAL_ERROR "consumer did not report success:\n${last_output}")
endif()
