"""The acceptance suite's pytest setup: fragless installed through fragless.install() in this
process, the device identified (a real GPU or simcuda) and named in pytest's header and
summary, and the `needs_kernels` marker.

Invariant: nothing that needs kernel output, cuBLAS or a compiler for the device passes on
simcuda. A test that needs them carries `@pytest.mark.needs_kernels("why")` and is SKIPPED
there with "simcuda runs no kernels: why"; the rest of a test runs on both.
Note [Checks on simcuda]: simcuda performs copies (host<->device, device<->device) and
memsets for real, so values put in with torch.tensor(...).cuda() / copy_ from the host and
read back with .cpu() are real checks on both; kernels (fill_, arithmetic, matmul) do
nothing there, so their results are checked only on a GPU.
"""
import os
import subprocess
import sys
import textwrap

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
# Steps shared with tests/torch/python (torch_suite_steps.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "support"))
import suite_environment  # noqa: E402

import fragless  # noqa: E402

if torch.cuda.is_available():
    fragless.install()  # before any CUDA tensor of this process

ON_SIMCUDA = suite_environment.running_on_simcuda() if torch.cuda.is_available() else False


def device_description() -> str:
    if not torch.cuda.is_available():
        return "no CUDA device visible to torch"
    name = torch.cuda.get_device_name(0)
    total_gib = torch.cuda.get_device_properties(0).total_memory / (1 << 30)
    if ON_SIMCUDA:
        return (f"simcuda (host-memory emulation, {total_gib:.0f} GiB, kernels do not run) -- "
                f"torch {torch.__version__}")
    return f"real GPU: {torch.cuda.device_count()} x {name} ({total_gib:.0f} GiB) -- torch {torch.__version__}, " \
           f"CUDA {torch.version.cuda}"


def pytest_configure(config):
    config.addinivalue_line("markers", "needs_kernels(reason): needs kernel output / cuBLAS / a device "
                                       "compiler; skipped on simcuda with the reason")


def pytest_report_header(config):
    return [f"fragless acceptance suite on: {device_description()}",
            f"allocator backend: {torch.cuda.get_allocator_backend() if torch.cuda.is_available() else '-'}"]


def pytest_collection_modifyitems(config, items):
    if not torch.cuda.is_available():  # a suite that checked nothing must not look passed
        pytest.exit("no CUDA device visible to torch, and no simcuda: run it through scripts/dev.sh gpu",
                    returncode=3)
    if not ON_SIMCUDA:
        return
    for item in items:
        marker = item.get_closest_marker("needs_kernels")
        if marker is not None:
            reason = marker.args[0] if marker.args else "needs kernel output"
            item.add_marker(pytest.mark.skip(reason=f"simcuda runs no kernels: {reason}"))


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(f"fragless acceptance suite ran on: {device_description()}")


@pytest.fixture
def on_simcuda() -> bool:
    return ON_SIMCUDA


def child_environment(extra=None) -> dict:
    environment = os.environ.copy()
    environment.update(suite_environment.library_environment())
    environment.update(extra or {})
    return environment


def run_python(code: str, extra_environment=None, timeout=600, args=()) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter with the suite's environment (plus extras)."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                          timeout=timeout, env=child_environment(extra_environment))


@pytest.fixture
def python_runner():
    return run_python
