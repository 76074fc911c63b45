"""memory_snapshot() / _snapshot(): the keys of the snapshot, its segments, blocks and trace
entries, block states, and per-tensor blocks."""
import torch

from observe import tensor_block_view


def run(obs):
    torch.cuda.memory._record_memory_history(max_entries=100)
    tensors = [torch.empty(n, dtype=torch.uint8, device="cuda") for n in (100, 5000, 3 << 20)]
    freed = torch.empty(2000, dtype=torch.uint8, device="cuda")
    del freed
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    obs.record("snapshot_keys", sorted(snapshot.keys()))
    obs.record("segment_keys", sorted({key for s in snapshot["segments"] for key in s}))
    obs.record("block_keys", sorted({key for s in snapshot["segments"] for b in s["blocks"] for key in b}))
    obs.record("trace_keys", sorted({key for e in snapshot["device_traces"][0] for key in e}))
    obs.record("block_states", sorted({b["state"] for s in snapshot["segments"] for b in s["blocks"]}))
    obs.record("segment_types", sorted({s["segment_type"] for s in snapshot["segments"]}))
    obs.record("blocks", [tensor_block_view(obs, snapshot, t) for t in tensors])
    obs.record("allocated_sum", sum(s["allocated_size"] for s in snapshot["segments"]) == torch.cuda.memory_allocated())
    obs.record("reserved_sum", sum(s["total_size"] for s in snapshot["segments"]) == torch.cuda.memory_reserved())
    obs.record("config_keys", sorted(snapshot.get("allocator_settings", {}).keys()))
    del tensors
