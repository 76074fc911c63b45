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


def _text_from(what: str, call, initial_bytes: int, error_text) -> str:
    """Calls call(buffer, its size, &needed) -- the C API's text-out convention -- with a
    buffer grown to `needed` until the text fits, and returns the text. A nonzero status
    raises RuntimeError("what: " + error_text(buffer))."""
    needed = ctypes.c_size_t(0)
    buffer = ctypes.create_string_buffer(initial_bytes)
    while True:
        status = call(buffer, len(buffer), ctypes.byref(needed))
        if status != 0:
            raise RuntimeError(f"{what}: {error_text(buffer)}")
        if needed.value <= len(buffer):
            return buffer.value.decode()
        buffer = ctypes.create_string_buffer(needed.value)


def stats(device=None) -> dict:
    """fragless's stats for the device: torch.cuda.memory_stats() keys plus fragless's own
    (fragmentation, map/unmap calls, ...), as a flat dict. With fragless installed, the keys
    shared with torch.cuda.memory_stats() have its values (blocks kept only for CUDA-graph
    checkpoints count as freed in both)."""
    handle = load_library()
    index = _device(device)
    text = _text_from(
        "fragless.stats()",
        lambda buffer, size, needed: handle.fragless_torch_stats_json(index, buffer, size, needed),
        1 << 16,
        lambda buffer: buffer.value.decode(errors="replace"),
    )
    return json.loads(text)["stats"]


def memory_summary(device=None) -> str:
    """fragless's memory summary table for the device (PyTorch's layout plus fragless's section)."""
    handle = load_library()
    index = _device(device)
    return _text_from(
        "fragless.memory_summary()",
        lambda buffer, size, needed: handle.fragless_memory_summary(index, buffer, size, needed),
        1 << 15,
        lambda buffer: handle.fragless_last_error().decode(),
    )


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
