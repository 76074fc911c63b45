#!/usr/bin/env bash
# Idempotent set-up: installs what the build needs and is missing, and nothing else.
#  - Debian packages: Catch2, spdlog (with fmt), clang + libFuzzer runtime, ccache (the
#    extra builds of scripts/dev.sh test reuse the default build's objects).
#  - A project-local virtual environment (.venv) holding the pinned torch wheel,
#    installed with --no-deps: we load only libc10 / libc10_cuda and the headers; plus
#    torch's Python dependencies and pytest (the Python tests) and scikit-build-core (the
#    package build, pip install --no-build-isolation .).
#  - A second one (.venv-torch<major.minor>) with the oldest supported torch, for the
#    tests against it (scripts/dev.sh test).
#  - Without a CUDA toolkit: CUDA headers and libcudart from NVIDIA's wheels, into .venv
#    (cmake/FraglessCuda.cmake finds them there); if that fails, one line says what is missing.
# Versions: scripts/pins.env. Running it twice does nothing the second time.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=pins.env
source "$root/scripts/pins.env"

say() { printf '[setup] %s\n' "$*" >&2; }

need_apt=()
# clang-14 + libclang-rt-14-dev: libFuzzer for the parser fuzzers; valgrind: instruction
# counts of the host paths (scripts/count_instructions.py).
for pkg in catch2 libspdlog-dev libfmt-dev clang-14 libclang-rt-14-dev ccache valgrind; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || need_apt+=("$pkg")
done
if ((${#need_apt[@]})); then
  say "installing Debian packages: ${need_apt[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

pip_quiet() { "$1/bin/pip" install -q --disable-pip-version-check --no-deps "${@:2}"; }

# ensure_torch_venv DIR VERSION: a virtual environment with torch==VERSION (no dependencies).
ensure_torch_venv() {
  local venv=$1 version=$2 have
  if [ ! -x "$venv/bin/python" ]; then
    say "creating virtual environment $venv"
    python3 -m venv "$venv"
  fi
  have=$("$venv/bin/python" - <<'PY' 2>/dev/null || true
import importlib.metadata as m
try:
    print(m.version("torch"))
except m.PackageNotFoundError:
    pass
PY
)
  if [ "$have" != "$version" ]; then
    say "installing torch==$version into $venv (no dependencies: only libc10, libc10_cuda and headers are used)"
    pip_quiet "$venv" "torch==$version"
  fi
}

# ensure_pins DIR PIN...: installs each name==version the environment lacks (no dependencies).
ensure_pins() {
  local venv=$1 missing
  shift
  missing=$("$venv/bin/python" - "$@" <<'PY' 2>/dev/null || true
import importlib.metadata as m, sys
for pin in sys.argv[1:]:
    name, version = pin.split("==")
    try:
        if m.version(name) != version:
            print(pin)
    except m.PackageNotFoundError:
        print(pin)
PY
)
  if [ -n "$missing" ]; then
    say "installing into $venv: $(echo $missing)"
    # shellcheck disable=SC2086
    pip_quiet "$venv" $missing
  fi
}

venv="$root/.venv"
ensure_torch_venv "$venv" "$TORCH_VERSION"
# shellcheck disable=SC2086
ensure_pins "$venv" $TORCH_PYTHON_DEPS $PACKAGE_BUILD_DEPS

oldest_venv="$root/.venv-torch${TORCH_OLDEST_VERSION%.*}"
ensure_torch_venv "$oldest_venv" "$TORCH_OLDEST_VERSION"
# shellcheck disable=SC2086
ensure_pins "$oldest_venv" $TORCH_PYTHON_DEPS

# CUDA: a toolkit where CMake's FindCUDAToolkit looks, else NVIDIA's wheels in .venv.
have_toolkit() {
  command -v nvcc >/dev/null 2>&1 && return 0
  local dir
  for dir in "${CUDAToolkit_ROOT:-}" "${CUDA_PATH:-}" "${CUDA_HOME:-}" /usr/local/cuda /usr; do
    [ -n "$dir" ] && [ -e "$dir/include/cuda_runtime_api.h" ] && return 0
  done
  return 1
}
if ! have_toolkit; then
  have_wheels=$(ls "$venv"/lib/python3*/site-packages/nvidia/cu13/lib/libcudart.so.13 2>/dev/null || true)
  if [ -z "$have_wheels" ]; then
    say "no CUDA toolkit found: installing CUDA headers and runtime from NVIDIA's wheels ($CUDA_WHEELS) into $venv"
    # shellcheck disable=SC2086
    if ! pip_quiet "$venv" $CUDA_WHEELS >/dev/null 2>&1; then
      say "missing: CUDA headers and libcudart (no CUDA toolkit, and pip could not install $CUDA_WHEELS): install the CUDA toolkit 12 or 13"
      exit 1
    fi
  fi
fi
say "ok"
