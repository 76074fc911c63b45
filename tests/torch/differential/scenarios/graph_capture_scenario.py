"""CUDA graph capture (simcuda emulates stream capture): tensors allocated during capture
live in the graph's private pool, empty_cache() keeps that pool's memory while the graph
exists, and deleting the graph lets empty_cache give it back."""
import torch


def pool_segments(pool_id):
    return [s for s in torch.cuda.memory_snapshot() if tuple(s["segment_pool_id"]) == tuple(pool_id)]


def run(obs):
    static_in = torch.zeros(1000, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    allocated_before = torch.cuda.memory_allocated()
    with torch.cuda.graph(graph):
        static_out = torch.empty(1000, device="cuda")
        static_out.copy_(static_in)
        scratch = torch.empty(1 << 20, device="cuda")
        del scratch
    obs.record("allocated_delta", torch.cuda.memory_allocated() - allocated_before)
    obs.record("out_in_graph_pool", any(
        s["address"] <= static_out.data_ptr() < s["address"] + s["total_size"] for s in pool_segments(graph.pool())))
    torch.cuda.empty_cache()
    obs.record("graph_pool_keeps_memory", sum(s["total_size"] for s in pool_segments(graph.pool())) > 0)
    obs.record("graph_pool_live", sorted(b["requested_size"] for s in pool_segments(graph.pool())
                                          for b in s["blocks"] if b["state"] == "active_allocated"))
    graph.replay()
    pool_id = graph.pool()
    del static_out, graph
    torch.cuda.empty_cache()
    obs.record("graph_pool_after_delete", len(pool_segments(pool_id)))
