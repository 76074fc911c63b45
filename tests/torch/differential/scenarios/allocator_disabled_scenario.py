"""caching_allocator_enable(False): tensors then come from cudaMalloc one by one, outside the
allocator's stats and snapshot, and are freed with cudaFree; enabling again resumes caching."""
import torch

from observe import stats_view


def in_snapshot(tensor):
    address = tensor.data_ptr()
    return any(block["address"] == address for segment in torch.cuda.memory_snapshot() for block in segment["blocks"])


def run(obs):
    torch.empty(1, device="cuda")
    obs.record("enabled_before", torch._C._cuda_cudaCachingAllocator_is_enabled())
    before = stats_view()
    obs.record_exception("disable", lambda: torch.cuda.memory.caching_allocator_enable(False))
    obs.record("enabled_while_disabled", torch._C._cuda_cudaCachingAllocator_is_enabled())
    uncached = [torch.empty(1 << 20, device="cuda") for _ in range(3)]
    obs.record("stats_unchanged_while_disabled", stats_view() == before)
    obs.record("uncached_in_snapshot", [in_snapshot(t) for t in uncached])
    obs.record("distinct_addresses", len({t.data_ptr() for t in uncached}))
    del uncached
    obs.record("stats_unchanged_after_free", stats_view() == before)
    torch.cuda.memory.caching_allocator_enable(True)
    cached = torch.empty(1 << 20, device="cuda")
    obs.record("cached_in_snapshot", in_snapshot(cached))
    with torch.cuda.memory.caching_allocator_disabled():
        inner = torch.empty(1000, device="cuda")
    obs.record("context_manager_block_in_snapshot", in_snapshot(inner))
    del inner
    obs.record("stats_after", stats_view())
