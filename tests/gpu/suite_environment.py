"""The acceptance suite's environment: where fragless's libraries are, and whether the suite
runs on a real GPU or on simcuda.

Invariant: the choice is made once, before any process of the suite imports torch (by
run.py, or by ctest's environment), and every child process -- spawned workers, torchrun
ranks, the preload and pluggable runs, the comparison's modes -- inherits that same
environment. Library paths come from the variables ctest sets (FRAGLESS_TORCH_LIBRARY,
FRAGLESS_LIBRARY, FRAGLESS_PRELOAD_LIBRARY) or else from the build directory.
"""
import ctypes
import os
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEFAULT_SIMCUDA_MEMORY = "8GiB"  # small: filling the device stays cheap on a host


def build_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("FRAGLESS_BUILD_DIR", ROOT / "build" / "default"))


def _library(variable: str, relative: str) -> str:
    return os.environ.get(variable) or str(build_dir() / relative)


def torch_library() -> str:
    """libfragless_torch.so (fragless.install())."""
    return _library("FRAGLESS_TORCH_LIBRARY", "hooks/torch/libfragless_torch.so")


def fragless_library() -> str:
    """libfragless.so (the C ABI: CUDAPluggableAllocator's fragless_malloc / fragless_free)."""
    return _library("FRAGLESS_LIBRARY", "allocator/libfragless.so")


def preload_library() -> str:
    """libfragless_preload.so (LD_PRELOAD)."""
    return _library("FRAGLESS_PRELOAD_LIBRARY", "hooks/libfragless_preload.so")


def library_environment() -> dict:
    """The variables every process of the suite needs to find fragless."""
    python_path = str(ROOT / "python")
    if os.environ.get("PYTHONPATH"):
        python_path += os.pathsep + os.environ["PYTHONPATH"]
    return {"FRAGLESS_TORCH_LIBRARY": torch_library(), "FRAGLESS_LIBRARY": fragless_library(),
            "FRAGLESS_PRELOAD_LIBRARY": preload_library(), "PYTHONPATH": python_path}


def _cmake_cache_value(name: str) -> str:
    try:
        for line in (build_dir() / "CMakeCache.txt").read_text(errors="replace").splitlines():
            if line.startswith(name + ":"):
                return line.partition("=")[2]
    except OSError:
        pass
    return ""


def simcuda_environment() -> dict:
    """simcuda in place of the NVIDIA libraries, with the test scaffolding of tests/torch
    (stand-ins for libraries the wheel links), as ctest sets it; simcuda accepts kernel launches."""
    build = build_dir()
    compiler = nvcc()
    cuda_lib = os.environ.get("CUDA_LIBRARY_DIR") or (
        str(pathlib.Path(compiler).resolve().parent.parent / "lib64") if compiler else "/usr/local/cuda/lib64")
    search = [str(build / "simcuda"), str(build / "tests/torch/stubs"), cuda_lib]
    return {"LD_LIBRARY_PATH": os.pathsep.join(search),
            "SIMCUDA_MEMORY": os.environ.get("SIMCUDA_MEMORY", DEFAULT_SIMCUDA_MEMORY)}


def gpu_environment() -> dict:
    """On a real GPU: the machine's driver, plus -- after whatever the library path already
    has, so real libraries win -- the CUDA toolkit's libraries and tests/torch's stand-ins for
    the NVIDIA libraries the wheel links (setup.sh installs torch without NVIDIA's wheels)."""
    compiler = nvcc()
    search = [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
    if compiler:
        search.append(str(pathlib.Path(compiler).resolve().parent.parent / "lib64"))
    search.append(str(build_dir() / "tests/torch/stubs"))
    return {"LD_LIBRARY_PATH": os.pathsep.join(search)}


_PROBE = """
import ctypes, sys
try:
    cuda = ctypes.CDLL("libcuda.so.1")
except OSError as failure:
    print("no libcuda.so.1:", failure); sys.exit(1)
if hasattr(cuda, "simcuda_race_count"):
    print("libcuda.so.1 is simcuda"); sys.exit(1)
count = ctypes.c_int(0)
status = cuda.cuInit(0)
if status != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value < 1:
    print(f"cuInit -> {status}, {count.value} devices"); sys.exit(1)
name = ctypes.create_string_buffer(256)
cuda.cuDeviceGetName(name, 256, 0)
print(f"{count.value} x {name.value.decode()}")
"""


def probe_real_gpu() -> tuple:
    """(True, description) when the system's libcuda.so.1 sees a device, else (False, why).
    Runs in a child without simcuda on the library path, so the answer is the machine's."""
    environment = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "SIMCUDA_MEMORY")}
    simcuda_dir = str(build_dir() / "simcuda")
    search = [p for p in environment.get("LD_LIBRARY_PATH", "").split(os.pathsep)
              if p and os.path.normpath(p) != os.path.normpath(simcuda_dir) and not p.rstrip("/").endswith("simcuda")]
    environment["LD_LIBRARY_PATH"] = os.pathsep.join(search)
    try:
        result = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                                timeout=120, env=environment)
    except (OSError, subprocess.TimeoutExpired) as failure:
        return False, str(failure)
    return result.returncode == 0, (result.stdout.strip() or result.stderr.strip())


def chosen_device() -> tuple:
    """(on a real GPU, description) as run.py chose it (FRAGLESS_SUITE_DEVICE), else probed."""
    chosen = os.environ.get("FRAGLESS_SUITE_DEVICE", "")
    if chosen.startswith("gpu:"):
        return True, chosen[len("gpu:"):]
    if chosen.startswith("simcuda:"):
        return False, chosen[len("simcuda:"):]
    if any(p.rstrip("/").endswith("simcuda") for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep)):
        return False, "simcuda on LD_LIBRARY_PATH"
    return probe_real_gpu()


def running_on_simcuda() -> bool:
    """In a process that has loaded libcuda.so.1 (after torch.cuda initialised): is it simcuda?"""
    try:
        return hasattr(ctypes.CDLL("libcuda.so.1"), "simcuda_race_count")
    except OSError:
        return False


def nvcc() -> str:
    """The CUDA compiler, or '' when there is none."""
    candidates = [os.environ.get("FRAGLESS_NVCC"), _cmake_cache_value("CUDAToolkit_NVCC_EXECUTABLE"),
                  shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"]
    return next((c for c in candidates if c and os.path.isfile(c) and os.access(c, os.X_OK)), "")
