#!/usr/bin/env bash
# scripts/gpu_report.sh OUT_DIR: everything only a real GPU can show, in one run, for a
# machine that has one. Builds fragless (Release) against the torch that `python3` imports,
# then runs, in this order (the most wanted first, so a short time budget keeps them):
#   1. fragless-bench calibrate: the device-call price table  -> device_call_costs.txt
#   2. every shared trace replayed through fragless, PyTorch and PyTorch with expandable
#      segments, on the GPU                                     -> traces.json, traces.svg
#   3. the acceptance suite (tests/gpu, pytest)
#   4. a sample of the generated corpus, every peer            -> corpus.json
#   5. the built-in workloads, every peer                      -> builtin.json
#   6. the shared traces replayed on simcuda on this machine's processor, every peer: set
#      beside step 2, it tells the real device calls' host cost from the processor's speed
#                                                                -> traces_simcuda.json
#   7. the shared traces' longest allocator calls, with host work between events, loop-plan
#      layouts on threads and not                                -> longest_calls.csv
#   8. the training comparison (tests/gpu/compare.py)          -> compare.json, compare.svg
# Everything printed goes to OUT_DIR/log.txt too; each step ends with one line
# "== NAME: passed|failed (rc N)|timed out in S s". A failed step does not stop the rest.
#
# It installs nothing (scripts/setup.sh needs a package registry; this needs none): the
# machine needs CMake, a C++20 compiler, the CUDA toolkit, spdlog and fmt, and a python3 with
# a CUDA torch 2.11 to 2.15 and pytest.
# Environment:
#   FRAGLESS_GPU_REPORT_SECONDS  time budget of the whole run (default 3600); each step gets
#                                at most its own limit and what is left of the budget
#   FRAGLESS_GPU_BUILD_DIR       build directory (default build/gpu)
#   FRAGLESS_TRACES_DIR          shared traces (default ../shared/traces beside the checkout)
#   FRAGLESS_GPU_CORPUS_SEEDS    corpus seeds per family (default 2)
#   FRAGLESS_TORCH_DIR           the torch package to build against (default: python3's)
#   FRAGLESS_GPU_REPORT_STEPS    the steps to run, comma-separated, in the order above
#                                (default all): calibrate, traces, acceptance, corpus,
#                                builtin, simcuda, longest, compare; the build always runs
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
if [ $# -ne 1 ]; then
  echo "usage: scripts/gpu_report.sh OUT_DIR" >&2
  exit 2
fi
mkdir -p "$1"
out=$(cd "$1" && pwd)
deadline=$((SECONDS + ${FRAGLESS_GPU_REPORT_SECONDS:-3600}))
build=${FRAGLESS_GPU_BUILD_DIR:-$root/build/gpu}
traces=${FRAGLESS_TRACES_DIR:-$root/../shared/traces}
corpus_seeds=${FRAGLESS_GPU_CORPUS_SEEDS:-2}
python=${PYTHON:-python3}
steps=${FRAGLESS_GPU_REPORT_STEPS:-calibrate,traces,acceptance,corpus,builtin,simcuda,longest,compare}
peers=fragless,pytorch,pytorch-expandable
bench=$build/bench/fragless-bench
export root out build python
exec > >(tee -a "$out/log.txt") 2>&1

# step KEY NAME MAX_SECONDS COMMAND...: runs COMMAND for at most MAX_SECONDS and what is left
# of the budget, and says how it ended; a KEY not in FRAGLESS_GPU_REPORT_STEPS is skipped.
failures=0
step() {
  local key=$1 name=$2 limit=$3 start=$SECONDS rc
  shift 3
  if [ "$key" != build ] && [[ ",$steps," != *",$key,"* ]]; then
    echo "== $name: skipped (not in FRAGLESS_GPU_REPORT_STEPS)"
    return
  fi
  local left=$((deadline - SECONDS))
  ((left < limit)) && limit=$left
  if ((limit < 15)); then
    echo "== $name: skipped (time budget spent)"
    return
  fi
  echo "== $name (at most ${limit} s)"
  if declare -F "$1" >/dev/null; then  # a function of this script: run in a child bash
    timeout --kill-after=10 "$limit" bash -c "$(declare -f "$1"); $1"
  else
    timeout --kill-after=10 "$limit" "$@"
  fi
  rc=$?
  if ((rc == 0)); then
    echo "== $name: passed in $((SECONDS - start)) s"
  elif ((rc == 124 || rc == 137)); then
    echo "== $name: timed out in $((SECONDS - start)) s"
    failures=$((failures + 1))
  else
    echo "== $name: failed (rc $rc) in $((SECONDS - start)) s"
    failures=$((failures + 1))
  fi
}

echo "== machine"
nvidia-smi -L || true
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv || true
torch_dir=${FRAGLESS_TORCH_DIR:-$("$python" -c "import torch, os; print(os.path.dirname(torch.__file__))")} || {
  echo "gpu_report: $python cannot import torch" >&2
  exit 1
}
export torch_dir
"$python" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))" || true
command -v nvcc >/dev/null && nvcc --version | tail -1
echo "fragless $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '(no git)')"

configure_and_build() {
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFRAGLESS_BUILD_TESTS=OFF \
    -DFRAGLESS_TORCH_DIR="$torch_dir" >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; return 1; }
  cmake --build "$build" -j "$(nproc)" --target fragless fragless_torch fragless_preload fragless-bench \
    fragless_bench_counting simcuda_runtime simcuda_driver simcuda_nvml
}
mkdir -p "$(dirname "$build")"
step build build 600 configure_and_build
if [ ! -x "$bench" ]; then
  echo "gpu_report: the build failed; nothing else can run" >&2
  exit 1
fi

step calibrate calibrate 120 "$bench" calibrate -o "$out/device_call_costs.txt"
[ -f "$out/device_call_costs.txt" ] && cat "$out/device_call_costs.txt"

step traces "shared traces" 300 "$bench" replay --traces "$traces" --allocators "$peers" --repetitions 5 \
  --json "$out/traces.json" --plot "$out/traces.svg"

export FRAGLESS_BUILD_DIR=$build
step acceptance "acceptance suite" 400 "$python" tests/gpu/run.py -q -rs

step corpus "corpus sample" 300 "$bench" corpus --seeds "$corpus_seeds" --repetitions 5 --jobs 1 \
  --allocators "$peers" --json "$out/corpus.json"

step builtin "built-in workloads" 200 "$bench" builtin --allocators "$peers" --repetitions 3 --json "$out/builtin.json"

# The same replay as step 2 on simcuda, on the same processor: host ns per operation there
# against step 2's separate what the real driver's calls cost from what the processor does.
simcuda_replay() {
  LD_LIBRARY_PATH="$build/simcuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$build/bench/fragless-bench" replay \
    --traces "$traces" --allocators fragless,pytorch,pytorch-expandable --repetitions 5 --no-table \
    --json "$out/traces_simcuda.json"
}
export traces
step simcuda "shared traces on simcuda" 120 simcuda_replay

# Note [Layout threads], Note [Host work]: the longest single allocator call with 5 us of
# host work before each event, laid out on threads and on the allocating thread.
step longest "longest calls" 150 "$bench" replay --traces "$traces" --allocators fragless \
  --conf sync=loop_plan_threads:false --repetitions 5 --host-work-ns 5000 --no-table \
  --csv "$out/longest_calls.csv"

compare_and_copy() {
  "$python" tests/gpu/run.py --compare --workloads gpt2-train,resnet50-train,gpt2-generate \
    --modes pytorch,expandable,install --repetitions 1 --out "$build/gpu-compare" || return
  cp "$build/gpu-compare/results.json" "$out/compare.json"
  cp "$build/gpu-compare/peak-memory.svg" "$out/compare.svg"
}
step compare "training comparison" 400 compare_and_copy

echo "== gpu_report: $failures step(s) failed or timed out; outputs in $out"
exit $((failures > 0))
