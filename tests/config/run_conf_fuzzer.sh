#!/usr/bin/env bash
# Builds the FRAGLESS_CONF parser fuzzer with clang (libFuzzer + ASan + UBSan) and runs it
# (tests/support/run_libfuzzer.sh). ctest runs it for a few seconds; a longer campaign:
# run_conf_fuzzer.sh DIR 600.
#   run_conf_fuzzer.sh BUILD_DIR SECONDS
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
# New inputs go to the build directory's corpus; the checked-in seeds are read only.
exec "$root/tests/support/run_libfuzzer.sh" "$1/fragless_conf_fuzzer" "$2" 4096 "$1/corpus" "$here/corpus" -- \
  -I"$root/allocator/include" "$here/option_parser_fuzzer.cpp" "$root"/allocator/config/*.cpp
