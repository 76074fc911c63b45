"""Steps the history-context scenarios share: one allocation kept and one freed, recorded
under _record_memory_history(**settings), observed as the kept block and the trace. Its
functions count as scenario frames (observe.frame_view), so stacks name them."""
import torch

from observe import tensor_block_view, trace_view


def allocate_kept():
    return torch.empty(1 << 18, device="cuda")


def allocate_freed():
    return torch.empty(1000, device="cuda")


def free_it(tensor_list):
    tensor_list.clear()


def record_kept_and_freed(obs, **history_settings):
    """Records "kept_block" and "trace"; returns (snapshot, kept tensor)."""
    torch.cuda.memory._record_memory_history(max_entries=1000, **history_settings)
    kept = allocate_kept()
    freed = [allocate_freed()]
    free_it(freed)
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    obs.record("kept_block", tensor_block_view(obs, snapshot, kept))
    obs.record("trace", trace_view(obs, snapshot))
    return snapshot, kept
