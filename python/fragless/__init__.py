"""fragless as PyTorch's CUDA allocator.

Call ``fragless.install()`` before the first CUDA tensor; plain PyTorch then allocates device
memory through fragless, and torch's memory tools (memory_stats, memory_summary, snapshots and
history, the profiler's memory view, OutOfMemoryError) report fragless's figures.
"""
from ._library import library_path, load_library
from ._api import compact, install, is_installed, memory_summary, pluggable_allocator, stats

__all__ = [
    "compact",
    "install",
    "is_installed",
    "library_path",
    "load_library",
    "memory_summary",
    "pluggable_allocator",
    "stats",
]
__version__ = "0.1.0"
