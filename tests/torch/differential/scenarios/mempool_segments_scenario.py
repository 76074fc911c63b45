"""Private pools: where tensors allocated in a MemPool land (segments, pool ids) and what the
pool's snapshot lists."""
import torch


def run(obs):
    pool = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(pool):
        small = [torch.empty(100, device="cuda") for _ in range(2)]
        large = [torch.empty(1 << 20, device="cuda") for _ in range(2)]
        huge = [torch.empty(3 << 20, device="cuda") for _ in range(2)]  # 12 MiB each
    outside = torch.empty(100, device="cuda")
    segments = pool.snapshot(include_traces=False)

    def segment_of(tensor):
        for index, segment in enumerate(segments):
            if segment["address"] <= tensor.data_ptr() < segment["address"] + segment["total_size"]:
                return index
        return None

    obs.record("small_share_segment", segment_of(small[0]) == segment_of(small[1]))
    obs.record("large_share_segment", segment_of(large[0]) == segment_of(large[1]))
    obs.record("huge_share_segment", segment_of(huge[0]) == segment_of(huge[1]))
    obs.record("outside_in_pool", segment_of(outside) is not None)
    obs.record("pool_live_requested", sorted(b["requested_size"] for s in segments for b in s["blocks"]
                                             if b["state"] == "active_allocated"))
    obs.record("pool_ids", sorted({tuple(s["segment_pool_id"]) == pool.id for s in segments}))
    obs.record("live_check", torch._C._cuda_checkPoolLiveAllocations(
        0, pool.id, {t.untyped_storage().data_ptr() for t in small + large + huge}))
    del small, large, huge, outside
