# Short libFuzzer runs of the trace readers (bench/fuzz), built with clang by a script so
# the main build may use any compiler. Registered only when clang++ is installed.
find_program(FRAGLESS_FUZZ_CLANG NAMES clang++-14 clang++)
if(FRAGLESS_FUZZ_CLANG AND NOT FRAGLESS_SANITIZER)
  add_test(NAME bench_fuzz_smoke
    COMMAND bash "${PROJECT_SOURCE_DIR}/bench/fuzz/run_fuzzers.sh" "${CMAKE_CURRENT_BINARY_DIR}/fuzz" 5)
  set_tests_properties(bench_fuzz_smoke PROPERTIES
    ENVIRONMENT "FRAGLESS_FUZZ_CXX=${FRAGLESS_FUZZ_CLANG};FRAGLESS_FUZZ_SEEDS=${PROJECT_SOURCE_DIR}/../shared/traces"
    LABELS "bench;fuzz;no-sanitizer" TIMEOUT 600)
endif()
