"""Segment entries: reserving memory while recording writes segment_alloc/segment_map
entries, empty_cache writes segment_free/segment_unmap ones; with context="all" each carries
a stack. (Segment counts and sizes are fragless's design: not compared.)"""
import torch


def allocate_big():
    return torch.empty(8 << 20, device="cuda")


def release_cache():
    torch.cuda.empty_cache()


def run(obs):
    torch.cuda.empty_cache()
    torch.cuda.memory._record_memory_history(context="all", stacks="python", max_entries=1000)
    big = allocate_big()
    del big
    release_cache()
    trace = torch.cuda.memory._snapshot()["device_traces"][0]
    torch.cuda.memory._record_memory_history(enabled=None)
    reserve = [e for e in trace if e["action"] in ("segment_alloc", "segment_map")]
    release = [e for e in trace if e["action"] in ("segment_free", "segment_unmap")]
    obs.record("reserve_entries_present", bool(reserve))
    obs.record("release_entries_present", bool(release))
    obs.record("reserve_entries_have_stacks", all(e.get("frames") for e in reserve))
    obs.record("release_entries_have_stacks", all(e.get("frames") for e in release))
    obs.record("release_stack_functions", sorted({f["name"] for e in release for f in e.get("frames", [])
                                                  if f["filename"].endswith("_scenario.py")}))
    obs.record("reserved_released", sum(e["size"] for e in reserve) == sum(e["size"] for e in release))
