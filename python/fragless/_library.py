"""Finding and loading libfragless_torch.so (and libfragless.so, its dependency).

The invariant: the library is loaded once per process, after torch (it needs torch's libc10
and libc10_cuda already loaded, and must see the same c10 globals torch uses), and a packaged
library is loaded only into the torch version it was built against.

Where it is taken from, in order: $FRAGLESS_TORCH_LIBRARY (an override, e.g. a build tree);
the package's own lib/ (what `pip install .` builds and ships); the dynamic loader's search
path (`cmake --install` puts it in the library directory).
"""
import ctypes
import os
import pathlib

_TORCH_LIBRARY_NAME = "libfragless_torch.so"
_handle = None


def packaged_library_path():
    """The libfragless_torch.so shipped inside the package, or None (a source checkout)."""
    bundled = pathlib.Path(__file__).with_name("lib") / _TORCH_LIBRARY_NAME
    return str(bundled) if bundled.exists() else None


def built_against_torch():
    """The torch version the packaged libraries were built against, or None."""
    try:
        from ._build_info import TORCH_VERSION
    except ImportError:
        return None
    return TORCH_VERSION


def library_path() -> str:
    """Where libfragless_torch.so is taken from (the order is in the module docstring)."""
    override = os.environ.get("FRAGLESS_TORCH_LIBRARY")
    if override:
        return override
    return packaged_library_path() or _TORCH_LIBRARY_NAME  # else the dynamic loader's search path


def _check_torch_version(path: str) -> None:
    """A packaged library must run in the torch it was built against (c10's C++ ABI)."""
    import torch

    built = built_against_torch()
    if built is None or path != packaged_library_path():
        return
    running = torch.__version__.split("+")[0]
    if running != built:
        raise RuntimeError(
            f"fragless: the installed package was built against torch {built}, but torch {running} "
            "is imported; reinstall fragless in this environment (pip install --no-build-isolation "
            "--force-reinstall <fragless source>) so that it builds against this torch.")


def load_library() -> ctypes.CDLL:
    """Loads libfragless_torch.so (importing torch first) and declares its C functions."""
    global _handle
    if _handle is not None:
        return _handle
    import torch  # noqa: F401  (loads libc10 / libc10_cuda into the process first)

    path = library_path()
    _check_torch_version(path)
    try:
        handle = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    except OSError as failure:
        raise RuntimeError(
            f"fragless: cannot load {path}: {failure}. Install the package with "
            "`pip install --no-build-isolation .` from the fragless source (it builds the library), or "
            "build the target fragless_torch and set FRAGLESS_TORCH_LIBRARY."
        ) from failure
    size_t_pointer = ctypes.POINTER(ctypes.c_ulong)
    handle.fragless_torch_install.argtypes = [ctypes.c_char_p, ctypes.c_ulong]
    handle.fragless_torch_install.restype = ctypes.c_int
    handle.fragless_torch_is_installed.argtypes = []
    handle.fragless_torch_is_installed.restype = ctypes.c_int
    handle.fragless_torch_stats_json.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_ulong, size_t_pointer]
    handle.fragless_torch_stats_json.restype = ctypes.c_int
    # libfragless.so's C ABI, reachable through the handle (a dependency of the library).
    handle.fragless_memory_summary.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t,
                                               ctypes.POINTER(ctypes.c_size_t)]
    handle.fragless_memory_summary.restype = ctypes.c_int
    handle.fragless_empty_cache.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_size_t)]
    handle.fragless_empty_cache.restype = ctypes.c_int
    handle.fragless_compact.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]
    handle.fragless_compact.restype = ctypes.c_int
    handle.fragless_last_error.argtypes = []
    handle.fragless_last_error.restype = ctypes.c_char_p
    _handle = handle
    return handle


def fragless_library_path() -> str:
    """The libfragless.so that libfragless_torch.so loaded (for CUDAPluggableAllocator)."""
    load_library()
    with open("/proc/self/maps", encoding="utf-8") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) >= 6 and os.path.basename(fields[5]).startswith("libfragless.so"):
                return fields[5]
    raise RuntimeError("fragless: libfragless.so is not loaded")
