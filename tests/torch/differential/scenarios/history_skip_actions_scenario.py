"""skip_actions leaves the named actions out of the history."""
import torch

from observe import trace_view


def run(obs):
    torch.cuda.memory._record_memory_history(max_entries=1000, skip_actions=["free_requested", "free_completed"])
    tensor = torch.empty(1000, device="cuda")
    del tensor
    obs.record("skip_frees", trace_view(obs, torch.cuda.memory._snapshot()))
    torch.cuda.memory._record_memory_history(enabled=None)
    torch.cuda.memory._record_memory_history(max_entries=1000, skip_actions=["alloc"])
    tensor = torch.empty(1000, device="cuda")
    del tensor
    obs.record("skip_alloc", trace_view(obs, torch.cuda.memory._snapshot()))
    torch.cuda.memory._record_memory_history(enabled=None)
