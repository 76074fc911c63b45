"""empty_cache() inside use_mem_pool(pool) keeps the live pool's cached segment (PyTorch
releases only the default pools and released private pools); after the pool is gone,
empty_cache gives its memory back."""
import torch


def pool_reserved(pool):
    return sum(segment["total_size"] for segment in pool.snapshot(include_traces=False))


def run(obs):
    pool = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(pool):
        tensor = torch.empty(1 << 20, device="cuda")
        del tensor
        torch.cuda.empty_cache()
        obs.record("pool_keeps_segment_inside", pool_reserved(pool) > 0)
    torch.cuda.empty_cache()
    obs.record("pool_keeps_segment_outside", pool_reserved(pool) > 0)
    obs.record("use_count", pool.use_count())
    pool_id = pool.id
    del pool
    torch.cuda.empty_cache()
    obs.record("released_pool_segments", sum(1 for s in torch.cuda.memory_snapshot() if tuple(s["segment_pool_id"]) == pool_id))
