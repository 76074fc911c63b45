#!/usr/bin/env bash
# Builds a libFuzzer harness with clang (libFuzzer + ASan + UBSan) when it is missing or
# older than what it is built from, then runs it for SECONDS. What the areas' fuzzer scripts
# (tests/config/run_conf_fuzzer.sh, tests/stats/run_page_fuzzer.sh) share.
#   run_libfuzzer.sh BINARY SECONDS MAX_LEN CORPUS_DIR... -- CLANG_ARGUMENTS...
# New inputs go to the first CORPUS_DIR; the others (checked-in seeds) are only read. "Built
# from": the source files among CLANG_ARGUMENTS and every file under their -I directories.
set -euo pipefail
binary=$1
seconds=$2
max_len=$3
shift 3
corpora=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
  corpora+=("$1")
  shift
done
[ $# -gt 0 ] && shift
compile=("$@")
inputs=()
for argument in "${compile[@]}"; do
  case $argument in
    -I*) inputs+=("${argument#-I}") ;;
    -*) ;;
    *) inputs+=("$argument") ;;
  esac
done
cxx=${FRAGLESS_FUZZ_CXX:-clang++-14}
command -v "$cxx" >/dev/null || cxx=clang++
mkdir -p "$(dirname "$binary")" "${corpora[0]}"
if [ ! -x "$binary" ] || [ -n "$(find "${inputs[@]}" -newer "$binary" | head -1)" ]; then
  "$cxx" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all "${compile[@]}" -o "$binary"
fi
"$binary" -max_total_time="$seconds" -max_len="$max_len" -print_final_stats=1 "${corpora[@]}" 2>&1 | tail -n 8
