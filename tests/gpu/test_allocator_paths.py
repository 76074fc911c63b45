"""The other ways in: the same PyTorch program (mode_program.py) through fragless.install(),
CUDAPluggableAllocator and LD_PRELOAD=libfragless_preload.so with
PYTORCH_NO_CUDA_MEMORY_CACHING=1, against PyTorch's own allocator; and an unmodified CUDA
program built with nvcc (<<<>>> kernels, -cudart shared) under the preload."""
import json
import os
import pathlib
import subprocess
import sys

import pytest
import torch

import allocator_modes
import suite_environment

HERE = pathlib.Path(__file__).parent


def run_mode(mode: str) -> dict:
    environment = allocator_modes.mode_environment(mode, os.environ)
    result = subprocess.run([sys.executable, str(HERE / "mode_program.py")], capture_output=True, text=True,
                            timeout=600, env=environment)
    assert result.returncode == 0, f"{mode}: {result.stdout}{result.stderr}"
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def reference_run():
    return run_mode("pytorch")


@pytest.mark.parametrize("mode", ["install", "pluggable", "preload"])
def test_same_program_through_fragless(mode, reference_run, on_simcuda):
    run = run_mode(mode)
    assert run["values_intact"] and reference_run["values_intact"]
    if mode == "install":
        assert run["backend"] == "fragless"
    else:  # fragless's own figures through its C ABI show the program's memory
        figures = run["fragless_figures"]
        assert figures is not None, "fragless's C ABI is not reachable in the process"
        assert figures["allocated_bytes_peak"] >= 64 * 256 * 4
        assert figures["reserved_bytes_peak"] >= figures["allocated_bytes_peak"]
    if not on_simcuda:  # kernel output: the losses and the matmul are real only on a GPU
        assert run["matmul_max_error"] < 1e-3
        assert run["losses"] == pytest.approx(reference_run["losses"], rel=1e-5)


@pytest.fixture(scope="module")
def vector_add(tmp_path_factory):
    compiler = suite_environment.nvcc()
    if not compiler:
        pytest.skip("no nvcc found (set FRAGLESS_NVCC)")
    major, minor = torch.cuda.get_device_capability(0)
    binary = tmp_path_factory.mktemp("nvcc") / "vector_add"
    result = subprocess.run([compiler, "-cudart", "shared", f"-arch=sm_{major}{minor}", "-o", str(binary),
                             str(HERE / "vector_add.cu")], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return binary


def run_under_preload(binary) -> subprocess.CompletedProcess:
    environment = allocator_modes.mode_environment("preload", os.environ)
    environment["LD_DEBUG"] = "bindings"  # the dynamic loader names who serves cudaMalloc
    environment["LD_DEBUG_OUTPUT"] = str(binary) + ".bindings"
    result = subprocess.run([str(binary)], capture_output=True, text=True, timeout=300, env=environment)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def bound_to_preload(binary, symbol: str) -> bool:
    for log in pathlib.Path(binary).parent.glob(pathlib.Path(binary).name + ".bindings*"):
        for line in log.read_text(errors="replace").splitlines():
            if f"`{symbol}'" in line and "libfragless_preload.so" in line.split(" to ")[-1]:
                return True
    return False


def test_nvcc_program_under_preload_allocates_through_fragless(vector_add):
    result = run_under_preload(vector_add)
    assert bound_to_preload(vector_add, "cudaMalloc") and bound_to_preload(vector_add, "cudaFree")
    assert "inputs intact: 8 of 8" in result.stdout, result.stdout


@pytest.mark.needs_kernels("the <<<>>> kernel's output")
def test_nvcc_program_under_preload_computes_correctly(vector_add):
    assert "sum correct: 8 of 8" in run_under_preload(vector_add).stdout
