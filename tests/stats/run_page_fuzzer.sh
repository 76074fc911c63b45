#!/usr/bin/env bash
# Builds the stats page reader fuzzer with clang (libFuzzer + ASan + UBSan) and runs it
# (tests/support/run_libfuzzer.sh). ctest runs it for a few seconds; a longer campaign:
# run_page_fuzzer.sh DIR 600.
#   run_page_fuzzer.sh BUILD_DIR SECONDS
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
stats="$root/allocator/stats"
exec "$root/tests/support/run_libfuzzer.sh" "$1/fragless_page_fuzzer" "$2" 8192 "$1/corpus" -- \
  -I"$root/allocator/include" -I"$stats" "$here/stats_page_fuzzer.cpp" "$stats/stats_page_reader.cpp" \
  "$stats/stats_page.cpp" "$stats/stats_directory.cpp" "$stats/stat_fields.cpp"
