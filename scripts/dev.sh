#!/usr/bin/env bash
# The README's commands:
#   scripts/dev.sh main   set up, build, run the main job (the fragmentation benchmark) on the
#                         machine's GPU when it has one, else on simcuda; the first line of
#                         output says which, and build/bench-report/device.txt records it
#   scripts/dev.sh test   set up, build, run the whole test suite (default build, then the
#                         torch tests against the oldest supported torch, the pip-built
#                         package in a fresh environment, the build from NVIDIA's CUDA wheels,
#                         then the address+undefined and the thread sanitizer builds)
#   scripts/dev.sh gpu    set up, build, run the acceptance suite (tests/gpu) on the real GPU
#                         when there is one, else on simcuda; `gpu --compare` runs the
#                         training comparison instead (tests/gpu/run.py says which device)
# Environment: FRAGLESS_SANITIZER_TESTS=0 skips the sanitizer pass of `test` (local use);
# FRAGLESS_DEVICE=gpu|simcuda overrides the GPU detection of `main`.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
what=${1:-}
shift || true
# shellcheck source=pins.env
source scripts/pins.env

# With ccache (setup.sh installs it) the extra builds of `test` (oldest torch, CUDA wheels)
# reuse the default build's objects: same sources and flags; NOHASHDIR so that the build
# directory, named in debug info, does not tell them apart.
if command -v ccache >/dev/null 2>&1; then
  export CMAKE_C_COMPILER_LAUNCHER=${CMAKE_C_COMPILER_LAUNCHER:-ccache}
  export CMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}
  export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
fi

build() {
  local preset=$1
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset"
}

# step NAME COMMAND...: runs one extra CI step and says how long it took.
step() {
  local name=$1 start=$SECONDS
  shift
  echo "== $name"
  "$@"
  echo "== $name: passed in $((SECONDS - start)) s"
}

# The torch tests (tests/torch, tests/c10, the bench's PyTorch peer) against the oldest
# supported torch, in a small build of only the torch-dependent targets.
test_oldest_torch() {
  local dir=build/torch${TORCH_OLDEST_VERSION%.*} torch_dir
  torch_dir=$(echo "$root"/.venv-torch"${TORCH_OLDEST_VERSION%.*}"/lib/python3*/site-packages/torch)
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFRAGLESS_WARNINGS_AS_ERRORS=ON \
    -DFRAGLESS_TORCH_DIR="$torch_dir" >/dev/null
  cmake --build "$dir" -j2 --target torch_checks
  ctest --test-dir "$dir" --output-on-failure -j2 -L 'torch|c10'
  ctest --test-dir "$dir" --output-on-failure -R '^bench_builtin_smoke$'
}

case "$what" in
  main)
    # The first line says where the benchmark runs (scripts/detect_device.sh).
    device=$(bash scripts/detect_device.sh)
    echo "device: $device"
    bash scripts/setup.sh
    build default
    mkdir -p build/bench-report
    echo "$device" >build/bench-report/device.txt
    # fragless-bench records the line in results.json and table.txt; on a GPU it counts the
    # device calls with its LD_PRELOADed counter and takes the device's memory as the capacity.
    export FRAGLESS_BENCH_DEVICE="$device"
    case "$device" in
      "real GPU"*) exec build/default/bench/fragless-bench main "$@" ;;
      *) exec scripts/with-simcuda build/default/bench/fragless-bench main "$@" ;;
    esac
    ;;
  test)
    bash scripts/setup.sh
    build default
    ctest --preset default "$@"
    step "torch ${TORCH_OLDEST_VERSION} (oldest supported)" test_oldest_torch
    step "pip-built package in a fresh environment" bash tests/install/python_package.sh build/default build/python-package
    step "build with CUDA from NVIDIA's wheels (no toolkit)" bash tests/install/cuda_wheels.sh build/cuda-wheels
    if [ "${FRAGLESS_SANITIZER_TESTS:-1}" != 0 ]; then
      build asan
      ctest --preset asan -LE no-sanitizer "$@"
      build tsan
      # Tests labelled single-threaded start no thread: ThreadSanitizer has nothing to find
      # there (AddressSanitizer has, and runs them), at 40-100 times their plain cost.
      ctest --preset tsan -LE 'no-sanitizer|single-threaded' "$@"
    fi
    ;;
  gpu)
    bash scripts/setup.sh
    cmake --preset default >/dev/null
    cmake --build --preset default --target fragless fragless_torch fragless_preload simcuda_runtime \
      simcuda_driver simcuda_nvml torch_python_scaffolding
    exec "$root/.venv/bin/python" tests/gpu/run.py "$@"
    ;;
  *)
    echo "usage: scripts/dev.sh main|test|gpu [args...]" >&2
    exit 2
    ;;
esac
