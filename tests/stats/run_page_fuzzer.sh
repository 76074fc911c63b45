#!/usr/bin/env bash
# Builds the stats page reader fuzzer with clang (libFuzzer + ASan + UBSan) and runs it.
# ctest runs it for a few seconds; a longer campaign: run_page_fuzzer.sh DIR 600.
#   run_page_fuzzer.sh BUILD_DIR SECONDS
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build_dir=$1
seconds=$2
cxx=${FRAGLESS_FUZZ_CXX:-clang++-14}
command -v "$cxx" >/dev/null || cxx=clang++
mkdir -p "$build_dir/corpus"
binary="$build_dir/fragless_page_fuzzer"
stats="$root/allocator/stats"
sources=("$here/stats_page_fuzzer.cpp" "$stats/stats_page_reader.cpp" "$stats/stats_page.cpp"
         "$stats/stats_directory.cpp" "$stats/stat_fields.cpp")
if [ ! -x "$binary" ] || [ -n "$(find "${sources[@]}" "$stats" "$root/allocator/include/fragless" -newer "$binary" | head -1)" ]; then
  "$cxx" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -I"$root/allocator/include" -I"$stats" "${sources[@]}" -o "$binary"
fi
"$binary" -max_total_time="$seconds" -max_len=8192 -print_final_stats=1 "$build_dir/corpus" 2>&1 | tail -n 8
