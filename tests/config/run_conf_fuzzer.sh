#!/usr/bin/env bash
# Builds the FRAGLESS_CONF parser fuzzer with clang (libFuzzer + ASan + UBSan) and runs it.
# ctest runs it for a few seconds; a longer campaign: run_conf_fuzzer.sh DIR 600.
#   run_conf_fuzzer.sh BUILD_DIR SECONDS
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build_dir=$1
seconds=$2
cxx=${FRAGLESS_FUZZ_CXX:-clang++-14}
command -v "$cxx" >/dev/null || cxx=clang++
mkdir -p "$build_dir/corpus"
binary="$build_dir/fragless_conf_fuzzer"
sources=("$here/option_parser_fuzzer.cpp" "$root"/allocator/config/*.cpp)
if [ ! -x "$binary" ] || [ -n "$(find "${sources[@]}" "$root/allocator/include/fragless" -newer "$binary" | head -1)" ]; then
  "$cxx" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -I"$root/allocator/include" "${sources[@]}" -o "$binary"
fi
# New inputs go to the build directory's corpus; the checked-in seeds are read only.
"$binary" -max_total_time="$seconds" -max_len=4096 -print_final_stats=1 "$build_dir/corpus" "$here/corpus" 2>&1 | tail -n 8
