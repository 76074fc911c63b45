"""Out-of-memory observers (torch._C._cuda_attach_out_of_memory_observer, what
torch.cuda.memory._record_memory_history's OOM dumps use) get the device, the bytes
allocated, and the device's total and free bytes; the history records an oom entry."""
import torch

from observe import trace_view


def run(obs):
    calls = []
    torch._C._cuda_attach_out_of_memory_observer(lambda *args: calls.append(args))
    live = torch.empty(5 << 20, dtype=torch.uint8, device="cuda")
    torch.cuda.memory._record_memory_history(max_entries=100)
    try:
        torch.empty(1 << 50, dtype=torch.uint8, device="cuda")
    except torch.OutOfMemoryError:
        pass
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    obs.record("calls", len(calls))
    device, allocated, total, free = calls[0]
    obs.record("observer_device", device)
    obs.record("observer_allocated", allocated)
    obs.record("observer_total_is_capacity", total == torch.cuda.get_device_properties(0).total_memory)
    obs.record("observer_free_at_most_total", 0 <= free <= total)
    obs.record("trace", [{k: v for k, v in e.items() if k != "addr"} for e in trace_view(obs, snapshot, ("oom",))])
    del live
