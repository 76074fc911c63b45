"""The fragless Python API: thin wrappers over libfragless_torch.so's C functions."""
import ctypes
import json
from typing import NamedTuple

from ._library import fragless_library_path, load_library

_INSTALLED, _ALREADY_INSTALLED, _NATIVE_INITIALISED = 0, 1, 2


def _device(device) -> int:
    import torch

    if device is None:
        return torch.cuda.current_device()
    if isinstance(device, torch.device):
        return device.index if device.index is not None else torch.cuda.current_device()
    return int(device)


def install() -> None:
    """Makes fragless PyTorch's CUDA allocator. Call it before any CUDA tensor exists.

    Installing twice is harmless. Raises RuntimeError when PyTorch's allocator has already
    been initialised (CUDA memory was allocated), since fragless could not free that memory.
    """
    handle = load_library()
    message = ctypes.create_string_buffer(1024)
    status = handle.fragless_torch_install(message, len(message))
    if status in (_INSTALLED, _ALREADY_INSTALLED):
        return
    raise RuntimeError(f"fragless.install(): {message.value.decode(errors='replace')}")


def is_installed() -> bool:
    """Whether fragless is PyTorch's CUDA allocator in this process."""
    return bool(load_library().fragless_torch_is_installed())


def stats(device=None) -> dict:
    """fragless's stats for the device: torch.cuda.memory_stats() keys plus fragless's own
    (fragmentation, map/unmap calls, ...), as a flat dict."""
    handle = load_library()
    index = _device(device)
    needed = ctypes.c_ulong(0)
    buffer = ctypes.create_string_buffer(1 << 16)
    while True:
        status = handle.fragless_torch_stats_json(index, buffer, len(buffer), ctypes.byref(needed))
        if status != 0:
            raise RuntimeError(f"fragless.stats(): {buffer.value.decode(errors='replace')}")
        if needed.value <= len(buffer):
            break
        buffer = ctypes.create_string_buffer(needed.value)
    return json.loads(buffer.value.decode())["stats"]


def memory_summary(device=None) -> str:
    """fragless's memory summary table for the device (PyTorch's layout plus fragless's section)."""
    handle = load_library()
    index = _device(device)
    needed = ctypes.c_size_t(0)
    buffer = ctypes.create_string_buffer(1 << 15)
    while True:
        status = handle.fragless_memory_summary(index, buffer, len(buffer), ctypes.byref(needed))
        if status != 0:
            raise RuntimeError(f"fragless.memory_summary(): {handle.fragless_last_error().decode()}")
        if needed.value <= len(buffer):
            return buffer.value.decode()
        buffer = ctypes.create_string_buffer(needed.value)


class CompactResult(NamedTuple):
    released_bytes: int  # reserved bytes given back to the device
    unmapped_pages: int  # free pages unmapped (docs/compaction.md)


def compact(device=None) -> CompactResult:
    """Runs a compaction pass on the device: every free page and cached mapping no stream can
    still touch is unmapped and given back, except a few free pages kept for reuse. Live
    tensors never move, and unlike torch.cuda.empty_cache() it does not synchronize the
    device. Returns the bytes released and the pages unmapped.
    """
    handle = load_library()
    released = ctypes.c_size_t(0)
    unmapped = ctypes.c_size_t(0)
    status = handle.fragless_compact(_device(device), ctypes.byref(released), ctypes.byref(unmapped))
    if status != 0:
        raise RuntimeError(f"fragless.compact(): {handle.fragless_last_error().decode()}")
    return CompactResult(released.value, unmapped.value)


def pluggable_allocator():
    """torch.cuda.memory.CUDAPluggableAllocator over libfragless.so's fragless_malloc /
    fragless_free (pass it to torch.cuda.memory.change_current_allocator). PyTorch's wrapper
    then refuses stats, snapshots and the rest; install() is the full integration."""
    import torch

    return torch.cuda.memory.CUDAPluggableAllocator(fragless_library_path(), "fragless_malloc", "fragless_free")
