"""torch.cuda.memory._allocation_traceback(ptr): the allocation stack of a live block while
history records stacks, None for unknown pointers or without recording."""
import torch

from observe import frame_view


def allocate_traced():
    return torch.empty(1000, device="cuda")


def run(obs):
    before = torch.empty(1000, device="cuda")
    torch.cuda.memory._record_memory_history(context="state", stacks="python")
    traced = allocate_traced()
    found = torch.cuda.memory._allocation_traceback(traced.untyped_storage().data_ptr())
    obs.record("traced", frame_view(found) if found is not None else None)
    obs.record("allocated_before_recording", torch.cuda.memory._allocation_traceback(before.data_ptr()))
    obs.record("unknown_pointer", torch.cuda.memory._allocation_traceback(12345))
    torch.cuda.memory._record_memory_history(enabled=None)
    del traced, before
