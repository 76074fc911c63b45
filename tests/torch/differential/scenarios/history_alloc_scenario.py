"""_record_memory_history(context="alloc"): stacks on alloc entries and live blocks; frees
carry the allocation's stack (PyTorch's RecordContext::ALLOC)."""
import torch

from observe import tensor_block_view, trace_view


def allocate_kept():
    return torch.empty(1 << 18, device="cuda")


def allocate_freed():
    return torch.empty(1000, device="cuda")


def free_it(tensor_list):
    tensor_list.clear()


def run(obs):
    torch.cuda.memory._record_memory_history(context="alloc", stacks="python", max_entries=1000)
    kept = allocate_kept()
    freed = [allocate_freed()]
    free_it(freed)
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    obs.record("kept_block", tensor_block_view(obs, snapshot, kept))
    obs.record("trace", trace_view(obs, snapshot))
