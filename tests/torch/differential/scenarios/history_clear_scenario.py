"""Turning history off and on again starts an empty history (PyTorch clears its buffer when
recording stops); clear_history=True empties it while recording."""
import torch

from observe import trace_view


def run(obs):
    torch.cuda.memory._record_memory_history(max_entries=1000)
    first = torch.empty(1000, device="cuda")
    torch.cuda.memory._record_memory_history(enabled=None)
    torch.cuda.memory._record_memory_history(max_entries=1000)
    second = torch.empty(2000, device="cuda")
    obs.record("after_reenable", trace_view(obs, torch.cuda.memory._snapshot()))
    torch.cuda.memory._record_memory_history(max_entries=1000, clear_history=True)
    third = torch.empty(3000, device="cuda")
    obs.record("after_clear_history", trace_view(obs, torch.cuda.memory._snapshot()))
    torch.cuda.memory._record_memory_history(enabled=None)
    obs.record("after_disable", trace_view(obs, torch.cuda.memory._snapshot()))
    obs.record("max_entries_2", None)
    torch.cuda.memory._record_memory_history(max_entries=2)
    kept = [torch.empty(n * 512, device="cuda") for n in (1, 2, 3)]
    obs.record("ring_keeps_newest", [e["size"] for e in trace_view(obs, torch.cuda.memory._snapshot())])
    torch.cuda.memory._record_memory_history(enabled=None)
    del first, second, third, kept
