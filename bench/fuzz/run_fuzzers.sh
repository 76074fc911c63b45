#!/usr/bin/env bash
# Builds the reader fuzzers (and the cost-table parser's) with clang (libFuzzer + AddressSanitizer + UBSan) and runs each
# for a while. ctest runs it with a few seconds per fuzzer (tests/bench/fuzz_smoke.cmake);
# for a real campaign see bench/README.md ("Fuzzing").
#   run_fuzzers.sh BUILD_DIR SECONDS_PER_FUZZER [CORPUS_ROOT]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bench_dir=$(dirname "$here")
stats_dir=$(dirname "$bench_dir")/allocator/stats  # the pickle reader
build_dir=$1
seconds=$2
corpus_root=${3:-$build_dir/corpus}
cxx=${FRAGLESS_FUZZ_CXX:-clang++-14}
command -v "$cxx" >/dev/null || cxx=clang++
mkdir -p "$build_dir"
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -I"$bench_dir" -I"$stats_dir")
readers=("$bench_dir"/traces/*.cpp "$stats_dir/pickle_reader.cpp")
# The cost-table parser with the default table's text compiled in, as CMake does.
costs_data="$build_dir/device_call_costs_data.cpp"
{ printf 'namespace fragless::bench {\nextern const char* const default_cost_table_text;\n'
  printf 'const char* const default_cost_table_text = R"fragless_costs('
  cat "$bench_dir/cost/device_call_costs.txt"
  printf ')fragless_costs";\n}\n'; } > "$costs_data"
for fuzzer in fuzz_pickle_reader fuzz_text_readers fuzz_cost_table; do
  binary="$build_dir/$fuzzer"
  sources=("${readers[@]}")
  [ "$fuzzer" = fuzz_cost_table ] && sources+=("$bench_dir/cost/cost_table.cpp" "$costs_data")
  if [ ! -x "$binary" ] || [ -n "$(find "$bench_dir/traces" "$bench_dir/cost" "$stats_dir/pickle_reader.cpp" "$here" -newer "$binary" -name '*.[ch]pp' | head -1)" ]; then
    "$cxx" "${flags[@]}" "$here/$fuzzer.cpp" "${sources[@]}" -o "$binary"
  fi
  corpus="$corpus_root/$fuzzer"
  mkdir -p "$corpus"
  seeds=()
  if [ "$fuzzer" = fuzz_pickle_reader ] && [ -d "${FRAGLESS_FUZZ_SEEDS:-}" ]; then
    # Small real snapshots make good seeds.
    while IFS= read -r seed; do seeds+=("$seed"); done < <(find "$FRAGLESS_FUZZ_SEEDS" -name '*.pickle' -size -300k | sort)
    for seed in "${seeds[@]}"; do cp -n "$seed" "$corpus/" 2>/dev/null || true; done
  fi
  if [ "$fuzzer" = fuzz_text_readers ] && [ -d "${FRAGLESS_FUZZ_SEEDS:-}" ]; then
    while IFS= read -r seed; do cp -n "$seed" "$corpus/" 2>/dev/null || true; done < <(find "$FRAGLESS_FUZZ_SEEDS" -name '*.csv' -size -20k | sort)
  fi
  [ "$fuzzer" = fuzz_cost_table ] && cp "$bench_dir/cost/device_call_costs.txt" "$corpus/default_table"
  echo "== $fuzzer for ${seconds}s"
  "$binary" -max_total_time="$seconds" -max_len=1048576 -rss_limit_mb=2048 -print_final_stats=1 "$corpus" 2>&1 | tail -n 12
done
