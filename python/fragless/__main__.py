"""`python -m fragless`: what this installation is -- the package version, the torch its
libraries were built against and the one importable here, and where the libraries are."""
import os
import sys

from . import __version__
from ._library import built_against_torch, library_path, packaged_library_path


def main() -> int:
    print(f"fragless {__version__}")
    print(f"package: {os.path.dirname(os.path.abspath(__file__))}")
    built = built_against_torch()
    print(f"built against torch: {built if built else 'unknown (not a built package)'}")
    try:
        import torch

        print(f"torch imported: {torch.__version__} ({os.path.dirname(torch.__file__)})")
    except ImportError as failure:
        print(f"torch imported: none ({failure})")
    override = os.environ.get("FRAGLESS_TORCH_LIBRARY")
    print(f"libfragless_torch: {library_path()}" + (" (FRAGLESS_TORCH_LIBRARY)" if override else ""))
    packaged = packaged_library_path()
    if packaged:
        lib_dir = os.path.dirname(packaged)
        for name in sorted(os.listdir(lib_dir)):
            print(f"packaged library: {os.path.join(lib_dir, name)}")
    stats = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "fragless-stats")
    print(f"fragless-stats: {stats if os.path.exists(stats) else 'not packaged'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
