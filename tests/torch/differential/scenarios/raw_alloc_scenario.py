"""torch.cuda.caching_allocator_alloc / caching_allocator_delete (raw blocks, with a stream)
and tensors used on a second stream (record_stream): the stats they move."""
import torch

from observe import stats_view


def run(obs):
    torch.empty(1, device="cuda")
    base = stats_view()
    side = torch.cuda.Stream()
    pointer = torch.cuda.caching_allocator_alloc(10000)
    on_side = torch.cuda.caching_allocator_alloc(3 << 20, stream=side)
    after = stats_view()
    obs.record("raw_delta", {k: after[k] - base[k] for k in after})
    torch.cuda.caching_allocator_delete(pointer)
    torch.cuda.caching_allocator_delete(on_side)
    obs.record("after_raw_delete", {k: v - base[k] for k, v in stats_view().items() if k.endswith(".current")})
    tensor = torch.empty(1 << 20, device="cuda")
    tensor.record_stream(side)
    del tensor
    obs.record("after_record_stream_free", {k: v - base[k] for k, v in stats_view().items() if k.endswith(".current")})
    side.synchronize()
    torch.cuda.synchronize()
    obs.record_exception("delete_unknown", lambda: torch.cuda.caching_allocator_delete(12345))
