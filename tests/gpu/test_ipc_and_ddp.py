"""fragless across processes: CUDA tensors sent through torch.multiprocessing (IPC) in both
directions between fragless processes, and torchrun with two ranks training with DDP, each
rank with fragless installed (gloo on one device or simcuda, NCCL on two or more GPUs)."""
import json
import os
import shutil
import subprocess
import sys

import pytest

import suite_environment
from conftest import child_environment
from torch_suite_steps import ipc_both_ways_failure


def test_cuda_tensors_shared_both_ways_through_ipc(tmp_path):
    failure = ipc_both_ways_failure(tmp_path, child_environment())
    assert failure is None, failure


DDP_SCRIPT = """
import json, os
import torch
import torch.distributed as dist
import fragless

fragless.install()
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
device = rank % torch.cuda.device_count()
torch.cuda.set_device(device)
backend = "nccl" if torch.cuda.device_count() >= world else "gloo"
dist.init_process_group(backend)
on_simcuda = os.environ.get("SUITE_ON_SIMCUDA") == "1"
torch.manual_seed(0)
width = 128
if on_simcuda:  # no cuBLAS there: elementwise layers only
    model = torch.nn.Sequential(torch.nn.LayerNorm(width), torch.nn.ReLU(), torch.nn.LayerNorm(width))
else:
    model = torch.nn.Sequential(torch.nn.Linear(width, 256), torch.nn.ReLU(), torch.nn.Linear(256, width))
model = torch.nn.parallel.DistributedDataParallel(model.cuda(), device_ids=[device])
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(4):
    batch = torch.randn(32, width, generator=torch.Generator().manual_seed(100 * step + rank)).cuda()
    loss = model(batch).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
torch.cuda.synchronize()
flat = torch.cat([p.detach().reshape(-1).cpu() for p in model.parameters()])
gathered = [torch.zeros_like(flat) for _ in range(world)]
dist.all_gather_object(gathered, flat)
result = json.dumps({"rank": rank, "backend": backend, "allocator": torch.cuda.get_allocator_backend(),
                     "allocations": fragless.stats()["allocation.all.allocated"],
                     "params_equal_across_ranks": all(torch.equal(g, gathered[0]) for g in gathered)})
with open(os.path.join(os.environ["SUITE_RESULT_DIR"], f"rank{rank}.json"), "w") as out:
    out.write(result)
dist.destroy_process_group()
# Leave without finalizing the interpreter. Under CPU load a rank aborted here, about one
# run in ten ("terminate called without an active exception"); a backtrace of the aborting
# rank showed gloo's worker thread destroying the all_gather's work after Python had begun
# finalizing: the decref of its tensors takes the GIL, a finalizing interpreter ends such a
# thread with pthread_exit, and the unwind through the work's noexcept destructor calls
# std::terminate. A race of PyTorch and CPython at exit, not the allocator's (its thread sat
# idle); every other check of the suite exits normally with fragless installed.
os._exit(0)
"""


@pytest.fixture(scope="module")
def ddp_ranks(tmp_path_factory):
    """Runs torchrun once (two ranks) and returns each rank's result."""
    on_simcuda = suite_environment.running_on_simcuda()
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable))
    command = [torchrun] if torchrun else [sys.executable, "-m", "torch.distributed.run"]
    directory = tmp_path_factory.mktemp("ddp")
    script = directory / "ddp.py"
    script.write_text(DDP_SCRIPT)
    environment = child_environment({"SUITE_ON_SIMCUDA": "1" if on_simcuda else "0", "OMP_NUM_THREADS": "1",
                                     "SUITE_RESULT_DIR": str(directory)})
    result = subprocess.run(command + ["--standalone", "--nproc-per-node=2", str(script)], capture_output=True,
                            text=True, timeout=600, env=environment)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-8000:]
    return [json.loads(path.read_text()) for path in sorted(directory.glob("rank*.json"))]


def test_torchrun_two_ranks_ddp_with_fragless(ddp_ranks):
    assert sorted(r["rank"] for r in ddp_ranks) == [0, 1]
    for rank in ddp_ranks:
        assert rank["allocator"] == "fragless" and rank["allocations"] > 0


@pytest.mark.needs_kernels("DDP's gradient averaging (bucket copies and division are kernels)")
def test_ddp_ranks_hold_the_same_weights(ddp_ranks):
    assert all(rank["params_equal_across_ranks"] for rank in ddp_ranks)
