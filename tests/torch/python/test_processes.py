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


SHARE_SCRIPT = """
import torch
import torch.multiprocessing as mp
import fragless


def child(inbox, outbox):
    fragless.install()  # a spawned worker installs fragless like its parent
    tensor = inbox.get()
    outbox.put(("backend", torch.cuda.get_allocator_backend()))
    outbox.put(("seen", float(tensor.cpu().sum())))
    tensor.copy_(torch.full((1000,), 7.0))
    torch.cuda.synchronize()
    outbox.put(("written", True))
    del tensor
    inbox.get()


if __name__ == "__main__":
    fragless.install()
    context = mp.get_context("spawn")
    inbox, outbox = context.Queue(), context.Queue()
    shared = torch.arange(1000, dtype=torch.float32).cuda()
    worker = context.Process(target=child, args=(inbox, outbox))
    worker.start()
    inbox.put(shared)
    results = dict(outbox.get(timeout=240) for _ in range(3))
    print("child backend:", results["backend"])
    print("child saw sum:", results["seen"])
    print("parent sees:", float(shared.cpu().sum()))
    inbox.put("done")
    worker.join(timeout=240)
    print("child exit:", worker.exitcode)
"""


def test_cuda_tensor_shared_with_a_spawned_process(tmp_path):
    # torch.multiprocessing sends the tensor through fragless's IPC handle; the worker maps
    # the same device memory: it reads the parent's data and the parent sees its writes.
    script = tmp_path / "share.py"
    script.write_text(SHARE_SCRIPT)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600,
                            env=os.environ.copy())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "child backend: fragless" in result.stdout
    assert "child saw sum: 499500.0" in result.stdout
    assert "parent sees: 7000.0" in result.stdout
    assert "child exit: 0" in result.stdout
