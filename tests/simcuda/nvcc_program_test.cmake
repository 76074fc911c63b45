# Note [Kernel launch entry points] (simcuda/src/runtime/runtime_launch.cpp), end to end:
# compiles tests/simcuda/programs/kernel_program.cu with nvcc twice and runs both on simcuda.
#  - with -cudart shared: <<<>>> goes through simcuda's __cudaGetKernel/__cudaLaunchKernel;
#    the program must exit 0;
#  - with the static runtime (default): it must fail, and simcuda must print its one-line
#    hint to rebuild with -cudart shared.
# Arguments: NVCC, SOURCE, WORK_DIR, SIMCUDA_DIR.
file(MAKE_DIRECTORY "${WORK_DIR}")
foreach(flavour shared static)
  execute_process(COMMAND "${NVCC}" -cudart ${flavour} -o "${WORK_DIR}/kernel_program_${flavour}" "${SOURCE}"
    RESULT_VARIABLE built ERROR_VARIABLE build_errors OUTPUT_VARIABLE build_output)
  if(NOT built EQUAL 0)
    message(FATAL_ERROR "nvcc -cudart ${flavour} failed:\n${build_output}${build_errors}")
  endif()
  set(ENV{LD_LIBRARY_PATH} "${SIMCUDA_DIR}")
  execute_process(COMMAND "${WORK_DIR}/kernel_program_${flavour}"
    RESULT_VARIABLE ran OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  message(STATUS "${flavour}: exit ${ran}\n  stdout: ${out}  stderr: ${err}")
  if(flavour STREQUAL "shared")
    if(NOT ran EQUAL 0 OR NOT out MATCHES "launch: cudaSuccess, sync: cudaSuccess")
      message(FATAL_ERROR "the -cudart shared program did not run on simcuda")
    endif()
  else()
    if(ran EQUAL 0 OR NOT err MATCHES "rebuild it with `nvcc -cudart shared`")
      message(FATAL_ERROR "the statically linked program got no rebuild hint from simcuda")
    endif()
  endif()
endforeach()
