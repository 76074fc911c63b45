"""torch.cuda's memory tools report fragless's figures: memory_stats, memory_summary,
memory_snapshot, and a recorded history dumped with _dump_snapshot that PyTorch's own
memory_viz code reads (its text reports and its HTML plots)."""
import torch
from torch.cuda import _memory_viz

import fragless
from torch_suite_steps import dump_and_load_snapshot, recorded_history


def test_memory_stats_match_fragless():
    keep = [torch.empty(n, device="cuda") for n in (1, 1000, 300_000, 5_000_000)]
    theirs = torch.cuda.memory_stats()
    ours = fragless.stats()
    shared = [key for key in theirs if key in ours]
    assert len(shared) > 50
    for key in shared:
        assert theirs[key] == ours[key], key
    assert theirs["allocation.all.current"] >= len(keep)
    assert torch.cuda.memory_allocated() >= sum(t.numel() * 4 for t in keep)
    assert torch.cuda.memory_reserved() >= torch.cuda.memory_allocated()


def test_memory_summary_names_the_figures():
    keep = torch.empty(1 << 20, device="cuda")
    summary = torch.cuda.memory_summary()
    for row in ("Allocated memory", "GPU reserved memory", "Allocations"):
        assert row in summary
    assert "fragless" in fragless.memory_summary()
    assert keep.is_cuda


def test_memory_snapshot_accounts_for_every_byte():
    keep = torch.empty(3 << 18, device="cuda")
    segments = torch.cuda.memory_snapshot()
    assert sum(s["total_size"] for s in segments) == torch.cuda.memory_reserved()
    assert sum(s["allocated_size"] for s in segments) == torch.cuda.memory_allocated()
    assert any(b["address"] == keep.data_ptr() and b["state"] == "active_allocated"
               for s in segments for b in s["blocks"])


def test_history_dump_is_read_by_memory_viz(tmp_path):
    torch.cuda.empty_cache()
    with recorded_history(max_entries=10_000):
        tensors = [torch.empty(size, device="cuda") for size in (100, 10_000, 1 << 20, 3 << 20)]
        freed = tensors.pop(1)
        freed_address = freed.data_ptr()
        del freed
        snapshot = dump_and_load_snapshot(tmp_path / "snapshot.pickle")
    actions = {(e["action"], e["addr"]) for e in snapshot["device_traces"][0]}
    assert ("alloc", freed_address) in actions and ("free_completed", freed_address) in actions
    assert all(("alloc", t.data_ptr()) in actions for t in tensors)
    # memory_viz: its text reports walk segments and traces, its plots embed the snapshot.
    assert "segments" in _memory_viz.segsum(snapshot).lower()
    assert _memory_viz.trace(snapshot)
    def no_flamegraph(lines):  # format_flamegraph without downloading flamegraph.pl
        return lines

    assert _memory_viz.memory(snapshot, format_flamegraph=no_flamegraph)
    assert _memory_viz.segments(snapshot, format_flamegraph=no_flamegraph)
    assert "<html" in _memory_viz.trace_plot(snapshot).lower()
    assert "<html" in _memory_viz.segment_plot(snapshot).lower()
