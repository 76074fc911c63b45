#!/usr/bin/env bash
# A machine without the CUDA toolkit: installs NVIDIA's CUDA wheels (scripts/pins.env
# CUDA_WHEELS) into a scratch directory, configures with FRAGLESS_CUDA_FROM_WHEELS=ON and the
# system toolkit's prefixes ignored and nvcc off PATH, and builds libfragless (its CUDA
# boundary compiles against the wheels' headers) and checks it links the wheels' libcudart;
# then installs its CMake package and builds tests/install/consumer against it, the toolkit
# still hidden.
#   tests/install/cuda_wheels.sh WORK_DIR
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=../../scripts/pins.env
source "$root/scripts/pins.env"
mkdir -p "$1"
work=$(cd "$1" && pwd)
say() { printf '[cuda-wheels] %s\n' "$*"; }

wheels="$work/wheels"
if [ ! -e "$wheels/nvidia/cu13/lib/libcudart.so.13" ]; then
  say "installing $CUDA_WHEELS into $wheels"
  # shellcheck disable=SC2086
  python3 -m pip install -q --disable-pip-version-check --no-deps --target "$wheels" $CUDA_WHEELS
fi

# Hide the system toolkit: no nvcc on PATH, its install prefixes ignored by every find_*.
nvcc_dirs=""
if command -v nvcc >/dev/null 2>&1; then
  nvcc_dirs=$(dirname "$(command -v nvcc)")
  nvcc_dirs="$nvcc_dirs;$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")"
fi
path_without_nvcc=$(printf '%s' "$PATH" | tr ':' '\n' | while read -r dir; do
  [ -x "$dir/nvcc" ] || printf '%s:' "$dir"; done)
ignored="/usr/local/cuda;/usr/local/cuda-13.0;/usr/local/cuda-12;/opt/cuda;$nvcc_dirs"

build="$work/build"
rm -rf "$build"
say "configuring with the toolkit hidden ($ignored)"
PATH=${path_without_nvcc%:} cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DFRAGLESS_WARNINGS_AS_ERRORS=ON -DFRAGLESS_BUILD_TESTS=OFF -DFRAGLESS_TORCH_DIR=none \
  -DFRAGLESS_CUDA_FROM_WHEELS=ON -DFRAGLESS_CUDA_WHEEL_ROOT="$wheels/nvidia/cu13" \
  "-DCMAKE_IGNORE_PREFIX_PATH=$ignored" | tee "$work/configure.log" | grep 'fragless: CUDA'
grep -q "fragless: CUDA 13.0 from NVIDIA's wheels at $wheels/nvidia/cu13" "$work/configure.log"
if grep -v '^CMAKE_IGNORE_PREFIX_PATH' "$build/CMakeCache.txt" | grep -q "/usr/local/cuda"; then
  say "the configuration still refers to the system toolkit:"
  grep -v '^CMAKE_IGNORE_PREFIX_PATH' "$build/CMakeCache.txt" | grep "/usr/local/cuda"
  exit 1
fi
PATH=${path_without_nvcc%:} cmake --build "$build" -j2 --target fragless
library=$(ls "$build"/allocator/libfragless.so.*.*)
# Which libcudart the library itself finds: its RUNPATH, not the caller's LD_LIBRARY_PATH (which
# outranks a RUNPATH and may name a system CUDA); paths compared resolved, since the work
# directory may be reached through a symbolic link.
expected_cudart=$(readlink -f "$wheels/nvidia/cu13/lib/libcudart.so.13")
found_cudart=$(env -u LD_LIBRARY_PATH ldd "$library" | awk '$1 == "libcudart.so.13" { print $3 }')
if [ -z "$found_cudart" ] || [ "$(readlink -f "$found_cudart")" != "$expected_cudart" ]; then
  say "$(basename "$library") does not load the wheels' libcudart ($expected_cudart):"
  env -u LD_LIBRARY_PATH ldd "$library"
  readelf -d "$library" | grep -E 'RUNPATH|RPATH|NEEDED' || true
  exit 1
fi
say "ok: $(basename "$library") built with CUDA headers and libcudart from the wheels"

# The CMake package of that build, used with the toolkit still hidden: find_package(fragless)
# must need no CUDA toolkit (cmake/fraglessConfig.cmake.in; FindCUDAToolkit is switched off
# for the consumer, since the hidden prefixes do not stop it finding one), and it must link.
prefix="$work/prefix"
rm -rf "$prefix" "$work/consumer"
cmake --install "$build" --component cmake_package --prefix "$prefix" >/dev/null
PATH=${path_without_nvcc%:} cmake -S "$root/tests/install/consumer" -B "$work/consumer" \
  -DCMAKE_PREFIX_PATH="$prefix" "-DCMAKE_IGNORE_PREFIX_PATH=$ignored" -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON \
  >"$work/consumer.log"
PATH=${path_without_nvcc%:} cmake --build "$work/consumer" >>"$work/consumer.log"
if grep -v '^CMAKE_IGNORE_PREFIX_PATH' "$work/consumer/CMakeCache.txt" | grep -q "/usr/local/cuda"; then
  say "the consumer's configuration refers to the system toolkit"
  exit 1
fi
say "ok: find_package(fragless) from that install, and a consumer linked, with no toolkit"
