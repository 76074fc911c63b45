"""The five ways a PyTorch program's device memory is allocated in the acceptance suite and
the comparison, and how to read each one's figures.

Invariant: a mode is fixed per process -- its environment is set before the process starts
(`mode_environment`) and `activate` runs before the first CUDA tensor -- so a process's
figures belong to exactly one allocator. Device memory in use is read from the driver's
cuMemGetInfo in every mode: the preload interposes the runtime's cudaMemGetInfo (it counts
fragless's cache as free) but not the driver's, so the figure means the same in all modes.
"""
import ctypes
import os

import suite_environment

MODES = ("pytorch", "expandable", "install", "pluggable", "preload")
DESCRIPTIONS = {
    "pytorch": "PyTorch's caching allocator",
    "expandable": "PyTorch, expandable_segments:True",
    "install": "fragless.install()",
    "pluggable": "CUDAPluggableAllocator over libfragless.so",
    "preload": "LD_PRELOAD=libfragless_preload.so, PYTORCH_NO_CUDA_MEMORY_CACHING=1",
}


def mode_environment(mode: str, base: dict) -> dict:
    """The environment a process of `mode` starts with (a copy of `base`, changed)."""
    environment = dict(base)
    environment.update(suite_environment.library_environment())
    environment.pop("PYTORCH_NO_CUDA_MEMORY_CACHING", None)
    environment.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    environment["FRAGLESS_MODE"] = mode
    if mode == "expandable":
        environment["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    elif mode == "preload":
        environment["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
        preloads = [p for p in environment.get("LD_PRELOAD", "").split(":") if p]
        environment["LD_PRELOAD"] = ":".join(preloads + [suite_environment.preload_library()])
    return environment


def activate(mode: str) -> None:
    """Run in the mode's process before its first CUDA tensor."""
    import torch

    if mode == "install":
        import fragless

        fragless.install()
    elif mode == "pluggable":
        allocator = torch.cuda.memory.CUDAPluggableAllocator(suite_environment.fragless_library(),
                                                             "fragless_malloc", "fragless_free")
        torch.cuda.memory.change_current_allocator(allocator)
    elif mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; one of {', '.join(MODES)}")


class _Figures(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int64) for name in (
        "allocated_bytes", "allocated_bytes_peak", "reserved_bytes", "reserved_bytes_peak", "active_bytes",
        "requested_bytes", "num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc",
        "num_device_free")]


def fragless_figures(mode: str, device: int = 0):
    """fragless's figures through its C ABI in the pluggable and preload modes (the library
    the process already uses), else None."""
    if mode == "pluggable":
        library = ctypes.CDLL(suite_environment.fragless_library())
    elif mode == "preload":
        library = ctypes.CDLL(suite_environment.preload_library())
    else:
        return None
    figures = _Figures()
    if library.fragless_get_memory_figures(device, ctypes.byref(figures)) != 0:
        return None
    return {name: getattr(figures, name) for name, _ in _Figures._fields_}


def max_reserved_bytes(mode: str):
    """The allocator's own peak of reserved bytes, where the mode reports one."""
    import torch

    if mode in ("pytorch", "expandable", "install"):
        return torch.cuda.max_memory_reserved()
    figures = fragless_figures(mode)
    return figures["reserved_bytes_peak"] if figures else None


def backend(mode: str) -> str:
    import torch

    try:
        return torch.cuda.get_allocator_backend()
    except RuntimeError as refusal:
        return f"({refusal})"


_driver = None


def _driver_library():
    global _driver
    if _driver is None:
        _driver = ctypes.CDLL("libcuda.so.1")
        _driver.cuMemGetInfo_v2.argtypes = [ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]
        _driver.cuCtxGetCurrent.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        _driver.cuCtxSetCurrent.argtypes = [ctypes.c_void_p]
    return _driver


def current_context():
    """The calling thread's driver context (torch's primary context once CUDA is up)."""
    context = ctypes.c_void_p(0)
    status = _driver_library().cuCtxGetCurrent(ctypes.byref(context))
    if status != 0:
        raise RuntimeError(f"cuCtxGetCurrent failed: {status}")
    return context


def use_context(context) -> None:
    """Makes `context` current on the calling thread (a driver context is per thread)."""
    status = _driver_library().cuCtxSetCurrent(context)
    if status != 0:
        raise RuntimeError(f"cuCtxSetCurrent failed: {status}")


def device_used_bytes() -> int:
    """total - free from the driver (cuMemGetInfo_v2, current context): comparable across modes."""
    free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
    status = _driver_library().cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total))
    if status != 0:
        raise RuntimeError(f"cuMemGetInfo_v2 failed: {status}")
    return total.value - free.value


def current_mode() -> str:
    return os.environ.get("FRAGLESS_MODE", "pytorch")
