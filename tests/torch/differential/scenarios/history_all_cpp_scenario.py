"""_record_memory_history(context="all", stacks="all"): every entry has a stack, frees the
free's own, and the stacks include C++ frames."""
from history_steps import record_kept_and_freed
from observe import block_of, has_cpp_frames


def run(obs):
    snapshot, kept = record_kept_and_freed(obs, context="all", stacks="all")
    _, block = block_of(snapshot, kept.data_ptr())
    obs.record("kept_block_has_cpp_frames", has_cpp_frames(block["frames"]) if block else None)
    allocs = [e for e in snapshot["device_traces"][0] if e["action"] == "alloc"]
    obs.record("alloc_entries_have_cpp_frames", [has_cpp_frames(e.get("frames", [])) for e in allocs])
