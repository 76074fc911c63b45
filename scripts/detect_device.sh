#!/usr/bin/env bash
# Prints where CUDA work runs on this machine, in one line:
#   "real GPU (<name from nvidia-smi -L>)"  when a GPU answers
#   "simcuda (no GPU found)"                 otherwise
# FRAGLESS_DEVICE=gpu|simcuda overrides the detection (tests, or forcing simcuda on a GPU
# machine); gpu without a GPU answering still says which GPU it could not find.
set -euo pipefail
gpu_name() {
  command -v nvidia-smi >/dev/null 2>&1 || return 1
  local listing
  listing=$(nvidia-smi -L 2>/dev/null) || return 1
  listing=$(printf '%s\n' "$listing" | grep -m1 '^GPU ' || true)
  [ -n "$listing" ] || return 1
  # "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)" -> "NVIDIA H100 80GB HBM3"
  listing=${listing#GPU *: }
  printf '%s\n' "${listing% (UUID:*}"
}
case "${FRAGLESS_DEVICE:-}" in
  simcuda) echo "simcuda (FRAGLESS_DEVICE=simcuda)" ;;
  gpu)
    if name=$(gpu_name); then echo "real GPU ($name)"; else echo "real GPU (FRAGLESS_DEVICE=gpu; nvidia-smi found none)"; fi
    ;;
  "")
    if name=$(gpu_name); then echo "real GPU ($name)"; else echo "simcuda (no GPU found)"; fi
    ;;
  *)
    echo "detect_device: FRAGLESS_DEVICE must be gpu or simcuda, not '${FRAGLESS_DEVICE}'" >&2
    exit 2
    ;;
esac
