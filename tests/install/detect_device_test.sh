#!/usr/bin/env bash
# scripts/detect_device.sh, the first line of `scripts/dev.sh main`: a GPU that nvidia-smi
# lists is used; no nvidia-smi, or one that fails or lists none, means simcuda;
# FRAGLESS_DEVICE overrides; a bad override is refused. nvidia-smi is faked on PATH.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
fake=$(mktemp -d)
trap 'rm -rf "$fake"' EXIT
failures=0
expect() {  # expect WANTED [VAR=VALUE...]: runs detect_device.sh with only the fake on PATH
  local wanted=$1 got
  shift
  got=$(env -u FRAGLESS_DEVICE PATH="$fake:/usr/bin:/bin" "$@" bash "$root/scripts/detect_device.sh" 2>&1) || true
  if [ "$got" = "$wanted" ]; then echo "ok: $wanted"; else echo "FAIL: wanted '$wanted', got '$got'"; failures=$((failures + 1)); fi
}
fake_smi() { printf '#!/bin/sh\n%s\n' "$1" >"$fake/nvidia-smi"; chmod +x "$fake/nvidia-smi"; }

# Without nvidia-smi (unless the system has one where the fake PATH still looks).
if [ ! -x /usr/bin/nvidia-smi ] && [ ! -x /bin/nvidia-smi ]; then expect "simcuda (no GPU found)"; fi
fake_smi 'echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-12345678-aaaa-bbbb-cccc-1234567890ab)"'
expect "real GPU (NVIDIA H100 80GB HBM3)"
expect "simcuda (FRAGLESS_DEVICE=simcuda)" FRAGLESS_DEVICE=simcuda
fake_smi 'echo "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver." >&2; exit 9'
expect "simcuda (no GPU found)"
fake_smi 'echo "No devices found."'
expect "simcuda (no GPU found)"
expect "real GPU (FRAGLESS_DEVICE=gpu; nvidia-smi found none)" FRAGLESS_DEVICE=gpu
expect "detect_device: FRAGLESS_DEVICE must be gpu or simcuda, not 'cpu'" FRAGLESS_DEVICE=cpu
if ((failures)); then echo "$failures failed"; exit 1; fi
echo "detect_device: all cases passed"
