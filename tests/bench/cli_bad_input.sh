#!/usr/bin/env bash
# fragless-bench on bad input: each case must exit non-zero with ONE stderr line naming the
# file and the position, and must leave no output file behind (not even a temp file).
#   cli_bad_input.sh BENCH_BINARY WORK_DIR
set -u
bench=$1
work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 2
failures=0

: > empty.pickle
printf '\x80\x04\x95' > truncated.pickle
printf '\x80\x04\x8c\x02os\x8c\x06system\x93.' > class_ref.pickle
printf 'Thread,Time,Action,Pointer,Stream\n1,0,allocate,0x10,0\n' > missing_column.csv
printf 'id,lower,upper,size\nx,0,5,-3\n' > negative.csv
printf 'fragless-trace 1\na 1 100 0\nf 2\n' > unknown_free.trace
printf 'fragless-trace 1\na 1 100 0\na 1 100 0\n' > double_alloc.trace
printf 'fragless-trace 1\na 1 99999999999999999999 0\n' > absurd.trace
printf 'Action,Pointer,Size,Stream\nallocate,0x10,100,0\nfree,0x20,100,0\n' > rmm_unknown_free.csv
printf 'fragless-trace 1\na 1 100 0\nf 1\n' > good.trace

expect() {  # expect FILE PATTERN
  local file=$1 pattern=$2
  "$bench" replay good.trace "$file" --json out.json --csv out.csv --plot out.svg --repetitions 1 \
    >stdout.txt 2>stderr.txt
  local status=$?
  local lines
  lines=$(wc -l < stderr.txt)
  if [ "$status" -eq 0 ]; then echo "FAIL $file: exit status 0"; failures=$((failures + 1)); fi
  if [ "$lines" -ne 1 ]; then echo "FAIL $file: $lines stderr lines:"; cat stderr.txt; failures=$((failures + 1)); fi
  if ! grep -q -- "$pattern" stderr.txt; then
    echo "FAIL $file: stderr does not match '$pattern':"; cat stderr.txt; failures=$((failures + 1))
  fi
  if ls out.* >/dev/null 2>&1; then echo "FAIL $file: output written:"; ls out.*; failures=$((failures + 1)); fi
  if [ -s stdout.txt ]; then echo "FAIL $file: partial table on stdout"; failures=$((failures + 1)); fi
}

expect empty.pickle 'empty.pickle: empty file'
expect truncated.pickle 'truncated.pickle: truncated pickle.*byte 2'
expect class_ref.pickle 'class_ref.pickle: forbidden opcode STACK_GLOBAL (0x93) at byte 14'
expect missing_column.csv "missing_column.csv:1: missing column 'Size'"
expect negative.csv "negative.csv:2: column 'size'"
expect unknown_free.trace 'unknown_free.trace:3: free of unknown block 2'
expect double_alloc.trace 'double_alloc.trace:3: block 1 allocated twice'
expect absurd.trace 'absurd.trace:2: size: number too large'
expect rmm_unknown_free.csv 'rmm_unknown_free.csv:3: free of unknown address 0x20'
expect no_such_file.pickle 'no_such_file.pickle: cannot open file'
mkdir -p a_directory.trace
expect a_directory.trace 'a_directory.trace: is a directory'

# The converter: same contract.
"$bench" convert truncated.pickle -o out.trace 2>stderr.txt
if [ $? -eq 0 ] || [ -e out.trace ] || ! grep -q 'truncated.pickle' stderr.txt; then
  echo "FAIL convert of a bad pickle"; failures=$((failures + 1))
fi
# Usage errors exit 2.
"$bench" replay good.trace --repetitions x >/dev/null 2>&1
if [ $? -ne 2 ]; then echo "FAIL usage error exit status"; failures=$((failures + 1)); fi
# --help is not an error; a bogus allocator or a bad --conf value stops before any replay.
"$bench" --help >stdout.txt 2>stderr.txt
if [ $? -ne 0 ] || ! grep -q '^usage:' stdout.txt || [ -s stderr.txt ]; then
  echo "FAIL --help"; cat stderr.txt; failures=$((failures + 1))
fi
"$bench" replay good.trace --allocators bogus --repetitions 1 --json out.json >stdout.txt 2>stderr.txt
if [ $? -ne 2 ] || ! grep -q "unknown allocator 'bogus'" stderr.txt || [ -e out.json ] || [ -s stdout.txt ]; then
  echo "FAIL --allocators bogus"; cat stderr.txt; failures=$((failures + 1))
fi
"$bench" replay good.trace --conf x=max_cached_bytes:abc --repetitions 1 --json out.json >stdout.txt 2>stderr.txt
if [ $? -ne 2 ] || ! grep -q -- "--conf x=max_cached_bytes:abc: .*max_cached_bytes" stderr.txt || [ -e out.json ]; then
  echo "FAIL --conf with a bad value"; cat stderr.txt; failures=$((failures + 1))
fi
# And the good file alone works, writing all outputs.
"$bench" replay good.trace --allocators cudamalloc --json out.json --csv out.csv --plot out.svg --repetitions 1 >/dev/null 2>stderr.txt
if [ $? -ne 0 ] || [ ! -s out.json ] || [ ! -s out.csv ] || [ ! -s out.svg ]; then
  echo "FAIL good trace run"; cat stderr.txt; failures=$((failures + 1))
fi
# Converter round trip through the CLI: a snapshot and its text form replay to the same figures.
shared=${FRAGLESS_SHARED_TRACES:-}
if [ -n "$shared" ] && [ -f "$shared/silmont2000+assignment2-systems/mem_snapshot.pickle" ]; then
  "$bench" convert "$shared/silmont2000+assignment2-systems/mem_snapshot.pickle" -o snap.trace 2>/dev/null
  "$bench" replay "$shared/silmont2000+assignment2-systems/mem_snapshot.pickle" --allocators cudamalloc \
    --repetitions 1 --csv a.csv >/dev/null 2>&1
  "$bench" replay snap.trace --allocators cudamalloc --repetitions 1 --csv b.csv >/dev/null 2>&1
  # Compare everything but the trace name, the host times (per operation and per pass, the longest call,
  # simcuda's emulation) and the estimated allocator times (host time plus priced calls;
  # the share of recorded wall time exists only for snapshots), by column name.
  strip() {
    awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) skip[i] = $i ~ /^(trace|host_ns_per_op|host_ns_by_pass|longest_op_ns|emulation_ns_per_op|estimated_.*)$/; next }
             NR <= 3 { line = ""; for (i = 1; i <= NF; i++) if (!skip[i]) line = line $i ","; print line }' "$1"
  }
  if [ ! -s snap.trace ] || [ "$(strip a.csv)" != "$(strip b.csv)" ]; then
    echo "FAIL convert round trip"; diff <(strip a.csv) <(strip b.csv); failures=$((failures + 1))
  fi
else
  echo "FAIL shared traces not found (FRAGLESS_SHARED_TRACES=$shared)"; failures=$((failures + 1))
fi
# A call-log directory that cannot be made (under a regular file): exit 2, one line naming it.
"$bench" replay good.trace --allocators cudamalloc --repetitions 1 --call-log good.trace/logs >stdout.txt 2>stderr.txt
status=$?
if [ "$status" -ne 2 ] || [ "$(wc -l < stderr.txt)" -ne 1 ] || ! grep -q "cannot create call-log directory good.trace/logs" stderr.txt; then
  echo "FAIL --call-log under a file: status $status"; cat stderr.txt; failures=$((failures + 1))
fi
ls ./*.tmp.* >/dev/null 2>&1 && { echo "FAIL temp files left"; failures=$((failures + 1)); }

if [ "$failures" -ne 0 ]; then echo "$failures failures"; exit 1; fi
echo "all bad-input cases behave"
