"""Scenarios that need a fresh process: installing too late, and PyTorch's
CUDAPluggableAllocator over libfragless.so (fragless_malloc / fragless_free)."""
import os
import subprocess
import sys
import textwrap

from torch_suite_steps import ipc_both_ways_failure


def run(code):
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                            timeout=300, env=os.environ.copy())
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_install_after_first_cuda_tensor_is_refused():
    out = run("""
        import torch, fragless
        keep = torch.empty(10, device="cuda")
        try:
            fragless.install()
        except RuntimeError as refusal:
            print("refused:", refusal)
        print("installed:", fragless.is_installed(), torch.cuda.get_allocator_backend())
    """)
    assert "refused:" in out and "before the first CUDA allocation" in out
    assert "installed: False native" in out


def test_pluggable_allocator_allocates_through_fragless():
    out = run("""
        import ctypes, os, torch
        import fragless
        # A build tree names it; an installed package finds its own (next to libfragless_torch).
        path = os.environ.get("FRAGLESS_LIBRARY") or fragless._library.fragless_library_path()
        allocator = torch.cuda.memory.CUDAPluggableAllocator(path, "fragless_malloc", "fragless_free")
        torch.cuda.memory.change_current_allocator(allocator)
        lib = ctypes.CDLL(path)

        class Figures(ctypes.Structure):
            _fields_ = [(name, ctypes.c_int64) for name in (
                "allocated_bytes", "allocated_bytes_peak", "reserved_bytes", "reserved_bytes_peak",
                "active_bytes", "requested_bytes", "num_alloc_retries", "num_ooms",
                "num_sync_all_streams", "num_device_alloc", "num_device_free")]

        def figures():
            f = Figures()
            assert lib.fragless_get_memory_figures(0, ctypes.byref(f)) == 0
            return f

        before = figures().requested_bytes
        tensor = torch.empty(1 << 20, device="cuda")
        during = figures().requested_bytes
        print("delta", during - before)
        del tensor
        print("after", figures().requested_bytes - before)
        # The pluggable wrapper refuses what the full integration supports.
        try:
            torch.cuda.memory_stats()
            print("stats: ok")
        except RuntimeError as refusal:
            print("stats refused")
    """)
    assert f"delta {4 << 20}" in out
    assert "after 0" in out
    assert "stats refused" in out


def test_cuda_tensors_shared_both_ways_with_a_spawned_process(tmp_path):
    # torch.multiprocessing sends the tensor through fragless's IPC handle; the worker maps
    # the same device memory: it reads the parent's data and the parent sees its writes; and
    # a tensor the worker makes reaches the parent the same way.
    # The acceptance suite runs the same program (tests/support/torch_suite_steps.py).
    failure = ipc_both_ways_failure(tmp_path, os.environ.copy())
    assert failure is None, failure
