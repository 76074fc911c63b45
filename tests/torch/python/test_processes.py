"""Scenarios that need a fresh process: installing too late, and PyTorch's
CUDAPluggableAllocator over libfragless.so (fragless_malloc / fragless_free)."""
import os
import subprocess
import sys
import textwrap


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
        path = os.environ["FRAGLESS_LIBRARY"]
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
