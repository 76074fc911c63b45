"""_record_memory_history(context="alloc"): stacks on alloc entries and live blocks; frees
carry the allocation's stack (PyTorch's RecordContext::ALLOC)."""
from history_steps import record_kept_and_freed


def run(obs):
    record_kept_and_freed(obs, context="alloc", stacks="python")
