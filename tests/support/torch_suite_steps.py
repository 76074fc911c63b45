"""Steps the two PyTorch suites share: tests/torch/python (simcuda with the stand-in
libraries) and the acceptance suite tests/gpu (a real GPU, or simcuda). Each suite puts this
directory on sys.path (tests/torch/python/conftest.py, tests/gpu/conftest.py) and keeps its
own assertions; what is here only drives torch and reads back what a user can observe.
"""
import contextlib
import pickle
import subprocess
import sys

import torch


def capture_copy_graph(static_in):
    """A CUDA graph whose capture allocates `static_out` (in the graph's private pool), copies
    static_in into it, and allocates and frees a 4 MiB scratch tensor; (graph, static_out)."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = torch.empty(static_in.numel(), device="cuda")
        static_out.copy_(static_in)  # a captured device-to-device copy
        scratch = torch.empty(1 << 20, device="cuda")
        del scratch
    return graph, static_out


def segment_pool_id(tensor):
    """The segment_pool_id of the segment under `tensor` (torch.cuda.memory_snapshot())."""
    for segment in torch.cuda.memory_snapshot():
        if segment["address"] <= tensor.data_ptr() < segment["address"] + segment["total_size"]:
            return tuple(segment["segment_pool_id"])
    return None


def segment_pool_ids():
    """The pool ids of every segment now ((0, 0): the device's own cache)."""
    return {tuple(s["segment_pool_id"]) for s in torch.cuda.memory_snapshot()}


def only_device_pool_left(pools_before=frozenset()):
    """After empty_cache, whether every segment is the device's own cache's (pool id (0, 0))
    or a pool's that already held segments before the check began (`pools_before`, from
    segment_pool_ids()): earlier work in the same process, such as a model compiled with
    mode="reduce-overhead", keeps its CUDA-graph pool for as long as the process lives."""
    torch.cuda.empty_cache()
    return segment_pool_ids() <= set(pools_before) | {(0, 0)}


@contextlib.contextmanager
def recorded_history(max_entries):
    """_record_memory_history on for the block, off after it whatever happens."""
    torch.cuda.memory._record_memory_history(max_entries=max_entries)
    try:
        yield
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)


def dump_and_load_snapshot(path):
    """_dump_snapshot(path), read back with pickle as a user would."""
    torch.cuda.memory._dump_snapshot(str(path))
    with open(path, "rb") as stream:
        return pickle.load(stream)


# A parent and a spawned worker, both with fragless installed, sharing CUDA tensors through
# torch.multiprocessing (IPC) both ways. Prints one dict: the worker's backend, what it saw
# of the parent's tensor, what the parent sees after the worker wrote into it, the sum of the
# tensor the worker sent back, and the worker's exit code.
IPC_BOTH_WAYS_SCRIPT = """
import torch
import torch.multiprocessing as mp
import fragless


def worker(inbox, outbox):
    fragless.install()  # a spawned worker installs fragless like its parent
    received = inbox.get()  # parent -> worker
    outbox.put(("backend", torch.cuda.get_allocator_backend()))
    outbox.put(("worker saw", received.cpu().tolist()[:3] + [float(received.cpu().sum())]))
    received.copy_(torch.full((1000,), 7.0))  # written in place: the parent must see it
    torch.cuda.synchronize()
    made = torch.arange(500, dtype=torch.float32).cuda()  # worker -> parent
    outbox.put(("made", made))
    inbox.get()  # keep `made` alive until the parent has read it
    del received, made


if __name__ == "__main__":
    fragless.install()
    context = mp.get_context("spawn")
    inbox, outbox = context.Queue(), context.Queue()
    shared = torch.arange(1000, dtype=torch.float32).cuda()
    process = context.Process(target=worker, args=(inbox, outbox))
    process.start()
    inbox.put(shared)
    results = dict(outbox.get(timeout=300) for _ in range(3))
    results["parent sees"] = float(shared.cpu().sum())
    results["parent got"] = float(results.pop("made").cpu().sum())
    inbox.put("done")
    process.join(timeout=300)
    results["worker exit"] = process.exitcode
    print(results)
"""

# What IPC_BOTH_WAYS_SCRIPT prints when sharing works both ways.
IPC_BOTH_WAYS_EXPECTED = (
    "'backend': 'fragless'",
    "'worker saw': [0.0, 1.0, 2.0, 499500.0]",  # parent -> worker
    "'parent sees': 7000.0",  # the worker's write, in the parent's memory
    "'parent got': 124750.0",  # worker -> parent
    "'worker exit': 0",
)


def ipc_both_ways_failure(directory, env):
    """Runs IPC_BOTH_WAYS_SCRIPT from `directory` with `env`: None when it exits 0 printing
    every IPC_BOTH_WAYS_EXPECTED, else what went wrong with its output."""
    script = directory / "ipc.py"
    script.write_text(IPC_BOTH_WAYS_SCRIPT)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600, env=env)
    missing = [line for line in IPC_BOTH_WAYS_EXPECTED if line not in result.stdout]
    if result.returncode == 0 and not missing:
        return None
    return f"exit {result.returncode}, missing {missing}\n{result.stdout}{result.stderr}"
