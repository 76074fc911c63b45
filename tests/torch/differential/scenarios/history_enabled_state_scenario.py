"""_record_memory_history(enabled="state"): stacks on live blocks, and what the trace holds;
then context=None: recording without stacks."""
import torch

from observe import tensor_block_view, trace_view


def allocate_kept():
    return torch.empty(1 << 18, device="cuda")


def run(obs):
    torch.cuda.memory._record_memory_history(enabled="state", max_entries=100)
    kept = allocate_kept()
    freed = torch.empty(1000, device="cuda")
    del freed
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    obs.record("state_kept_block", tensor_block_view(obs, snapshot, kept))
    obs.record("state_trace", trace_view(obs, snapshot))
    torch.cuda.memory._record_memory_history(context=None, max_entries=100)
    plain = allocate_kept()
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    obs.record("no_context_block", tensor_block_view(obs, snapshot, plain))
    obs.record("no_context_trace", trace_view(obs, snapshot))
    del kept, plain
