#!/usr/bin/env bash
# The pip-built package, as a user gets it: builds the wheel (pip wheel --no-build-isolation,
# scikit-build-core, Release, warnings as errors) against the torch of a fresh virtual
# environment, installs it there and runs the Python tests (tests/torch/python) on simcuda
# with no PYTHONPATH and no FRAGLESS_* variable: fragless and its libraries come from the
# installed package. Also checks `python -m fragless` and the fragless-stats console script.
#   tests/install/python_package.sh BUILD_DIR WORK_DIR
# BUILD_DIR: a built default tree (simcuda, the stand-in libraries of
# tests/torch). Packages come from pip's cache once scripts/setup.sh has fetched them.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=../../scripts/pins.env
source "$root/scripts/pins.env"
build=$(cd "$1" && pwd)
mkdir -p "$2"
work=$(cd "$2" && pwd)
say() { printf '[python-package] %s\n' "$*"; }

venv="$work/venv"
rm -rf "$venv" "$work/dist"
python3 -m venv "$venv"
say "fresh environment $venv: torch==$TORCH_VERSION and the test and build dependencies"
# shellcheck disable=SC2086
"$venv/bin/pip" install -q --disable-pip-version-check --no-deps "torch==$TORCH_VERSION" \
  $TORCH_PYTHON_DEPS $PACKAGE_BUILD_DEPS

say "building the wheel"
CMAKE_BUILD_PARALLEL_LEVEL=2 "$venv/bin/pip" wheel -q --disable-pip-version-check --no-build-isolation \
  --no-deps -w "$work/dist" -Cbuild-dir="$work/cmake" -Ccmake.define.FRAGLESS_WARNINGS_AS_ERRORS=ON "$root"
wheel=$(ls "$work"/dist/fragless-*.whl)
# Each native file once (a wheel stores a symbolic link as a second copy of the file).
"$venv/bin/python" - "$wheel" <<'PY'
import collections, sys, zipfile
names = [n.rsplit("/", 1)[-1] for n in zipfile.ZipFile(sys.argv[1]).namelist()]
stems = collections.Counter(n.split(".so")[0] for n in names if ".so" in n or n == "fragless-stats")
print("[python-package] native files:", ", ".join(sorted(n for n in names if ".so" in n or n == "fragless-stats")))
bad = {stem: count for stem, count in stems.items() if count != 1}
if bad or set(stems) != {"libfragless", "libfragless_torch", "fragless-stats"}:
    sys.exit(f"[python-package] the wheel ships {dict(stems)}: each of libfragless, libfragless_torch, fragless-stats once")
PY
say "installing $(basename "$wheel")"
"$venv/bin/pip" install -q --disable-pip-version-check --no-deps "$wheel"

# Away from the source tree, and without anything pointing into it.
cd "$work"
unset PYTHONPATH FRAGLESS_TORCH_LIBRARY FRAGLESS_LIBRARY
cuda_lib_dir=$(sed -n 's/^FRAGLESS_CUDA_LIBRARY_DIR:INTERNAL=//p' "$build/CMakeCache.txt")
# On simcuda, with the stand-ins for NVIDIA libraries this machine may lack (tests/torch).
on_simcuda() {
  env LD_LIBRARY_PATH="$build/simcuda:$build/tests/torch/stubs:$cuda_lib_dir" "$@"
}
about=$(on_simcuda "$venv/bin/python" -m fragless)
printf '%s\n' "$about"
grep -q "^built against torch: $TORCH_VERSION\$" <<<"$about"
grep -q "^torch imported: $TORCH_VERSION" <<<"$about"
grep -q "^libfragless_torch: $venv/lib/python3[^/]*/site-packages/fragless/lib/libfragless_torch.so\$" <<<"$about"
"$venv/bin/fragless-stats" --help >/dev/null

say "Python tests on simcuda with the installed package"
FRAGLESS_TEST_EXPECT_PACKAGED=1 on_simcuda "$venv/bin/python" -m pytest -q -p no:cacheprovider "$root/tests/torch/python"
