"""memory_stats(): the keys, and the fields that must agree (allocated, active, requested
bytes and counts) through allocations, frees, peaks and resets."""
import torch

from observe import stats_view


def run(obs):
    keys_expected = set(torch.cuda.memory_stats().keys()) if torch.cuda.is_initialized() else None
    torch.empty(1, device="cuda")
    obs.record("keys", sorted(torch.cuda.memory_stats().keys()))
    obs.record("keys_before_init", keys_expected is None or sorted(keys_expected) == [])
    tensors = [torch.empty(n, dtype=torch.uint8, device="cuda") for n in (1, 511, 512, 513, 1 << 20, (1 << 20) + 1, 10 << 20, 3 << 24)]
    obs.record("after_alloc", stats_view())
    for index in (1, 3, 5):
        tensors[index] = None
    obs.record("after_free", stats_view())
    obs.record("memory_allocated", torch.cuda.memory_allocated())
    obs.record("max_memory_allocated", torch.cuda.max_memory_allocated())
    torch.cuda.reset_peak_memory_stats()
    obs.record("after_reset_peak", stats_view())
    torch.cuda.reset_accumulated_memory_stats()
    obs.record("after_reset_accumulated", stats_view())
    del tensors
    obs.record("after_all_freed", stats_view())
    obs.record("summary_rows", [line.split("|")[1].strip() for line in torch.cuda.memory_summary().splitlines()
                                if line.startswith("|") and "|" in line[1:] and line.count("|") > 2][:14])
