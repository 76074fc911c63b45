"""_record_memory_history(context="all", stacks="all"): every entry has a stack, frees the
free's own, and the stacks include C++ frames."""
import torch

from observe import has_cpp_frames, tensor_block_view, trace_view


def allocate_kept():
    return torch.empty(1 << 18, device="cuda")


def allocate_freed():
    return torch.empty(1000, device="cuda")


def free_it(tensor_list):
    tensor_list.clear()


def run(obs):
    torch.cuda.memory._record_memory_history(context="all", stacks="all", max_entries=1000)
    kept = allocate_kept()
    freed = [allocate_freed()]
    free_it(freed)
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    obs.record("kept_block", tensor_block_view(obs, snapshot, kept))
    obs.record("trace", trace_view(obs, snapshot))
    _, block = next(((s, b) for s in snapshot["segments"] for b in s["blocks"]
                     if b["address"] == kept.data_ptr()), (None, None))
    obs.record("kept_block_has_cpp_frames", has_cpp_frames(block["frames"]) if block else None)
    allocs = [e for e in snapshot["device_traces"][0] if e["action"] == "alloc"]
    obs.record("alloc_entries_have_cpp_frames", [has_cpp_frames(e.get("frames", [])) for e in allocs])
