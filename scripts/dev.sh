#!/usr/bin/env bash
# The README's two commands:
#   scripts/dev.sh main   set up, build, run the main job (the fragmentation benchmark)
#   scripts/dev.sh test   set up, build, run the whole test suite (default build, then
#                         the address+undefined sanitizer build, then the thread
#                         sanitizer build)
#   scripts/dev.sh gpu    set up, build, run the acceptance suite (tests/gpu) on the real GPU
#                         when there is one, else on simcuda; `gpu --compare` runs the
#                         training comparison instead (tests/gpu/run.py says which device)
# Environment: FRAGLESS_SANITIZER_TESTS=0 skips the sanitizer pass of `test` (local use).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
what=${1:-}
shift || true

build() {
  local preset=$1
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset"
}

case "$what" in
  main)
    bash scripts/setup.sh
    build default
    exec scripts/with-simcuda build/default/bench/fragless-bench main "$@"
    ;;
  test)
    bash scripts/setup.sh
    build default
    ctest --preset default "$@"
    if [ "${FRAGLESS_SANITIZER_TESTS:-1}" != 0 ]; then
      build asan
      ctest --preset asan -LE no-sanitizer "$@"
      build tsan
      ctest --preset tsan -LE no-sanitizer "$@"
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
