#!/usr/bin/env bash
# Idempotent set-up: installs what the build needs and is missing, and nothing else.
#  - Debian packages: Catch2, spdlog (with fmt), clang + libFuzzer runtime.
#  - A project-local virtual environment (.venv) holding the pinned torch wheel,
#    installed with --no-deps: we load only libc10 / libc10_cuda and the headers.
# Running it twice does nothing the second time.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=pins.env
source "$root/scripts/pins.env"

say() { printf '[setup] %s\n' "$*" >&2; }

need_apt=()
# clang-14 + libclang-rt-14-dev: libFuzzer for the parser fuzzers.
for pkg in catch2 libspdlog-dev libfmt-dev clang-14 libclang-rt-14-dev; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || need_apt+=("$pkg")
done
if ((${#need_apt[@]})); then
  say "installing Debian packages: ${need_apt[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

venv="$root/.venv"
if [ ! -x "$venv/bin/python" ]; then
  say "creating virtual environment $venv"
  python3 -m venv "$venv"
fi
have_torch=$("$venv/bin/python" - <<'PY' 2>/dev/null || true
import importlib.metadata as m
try:
    print(m.version("torch"))
except m.PackageNotFoundError:
    pass
PY
)
if [ "$have_torch" != "$TORCH_VERSION" ]; then
  say "installing torch==$TORCH_VERSION (no dependencies: only libc10, libc10_cuda and headers are used)"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps "torch==$TORCH_VERSION"
fi
# Python tests: torch's own Python dependencies (not its NVIDIA wheels) and pytest, pinned.
missing_python=$("$venv/bin/python" - $TORCH_PYTHON_DEPS <<'PY' 2>/dev/null || true
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
if [ -n "$missing_python" ]; then
  say "installing Python test dependencies: $(echo $missing_python)"
  # shellcheck disable=SC2086
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps $missing_python
fi
say "ok"
