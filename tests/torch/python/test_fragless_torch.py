"""Plain PyTorch on simcuda with fragless installed: every tensor's memory comes from
fragless, and torch's memory tools report fragless's figures.

Runs under ctest (torch_python_test) with simcuda and the generated stand-in libraries
(tests/torch/CMakeLists.txt). Kernels are no-ops on simcuda; allocations
are real. cuBLAS and cuDNN do not work on simcuda, so the model uses elementwise layers only.
"""
import pytest
import torch

import fragless
from torch_suite_steps import (capture_copy_graph, dump_and_load_snapshot, only_device_pool_left, recorded_history,
                               segment_pool_id)

fragless.install()  # before any CUDA tensor: the module's first statement that touches CUDA


def figures():
    return fragless.stats()


def test_installed_everywhere():
    assert fragless.is_installed()
    assert torch.cuda.get_allocator_backend() == "fragless"
    fragless.install()  # idempotent from Python


def test_library_location():
    """Under ctest the build tree's library (FRAGLESS_TORCH_LIBRARY); for the pip-built package
    (tests/install/python_package.sh sets FRAGLESS_TEST_EXPECT_PACKAGED) the package's own."""
    import os

    path = fragless.library_path()
    if os.environ.get("FRAGLESS_TEST_EXPECT_PACKAGED"):
        assert "FRAGLESS_TORCH_LIBRARY" not in os.environ
        package_dir = os.path.dirname(os.path.abspath(fragless.__file__))
        assert "site-packages" in package_dir
        assert path == os.path.join(package_dir, "lib", "libfragless_torch.so")
        assert fragless._library.built_against_torch() == torch.__version__.split("+")[0]
        assert fragless._library.fragless_library_path().startswith(os.path.join(package_dir, "lib"))
    else:
        assert path == os.environ["FRAGLESS_TORCH_LIBRARY"]


def test_tensor_memory_comes_from_fragless():
    before = figures()["allocation.all.current"]
    tensor = torch.empty(1 << 20, device="cuda")  # 4 MiB
    assert figures()["allocation.all.current"] == before + 1
    assert torch.cuda.memory_allocated() == figures()["allocated_bytes.all.current"]
    assert torch.cuda.memory_allocated() >= tensor.numel() * 4
    del tensor
    assert figures()["allocation.all.current"] == before


def test_memory_stats_are_fragless_stats():
    keep = [torch.empty(n, device="cuda") for n in (10, 1000, 300000, 5000000)]
    theirs = torch.cuda.memory_stats()
    ours = figures()
    for key, value in theirs.items():
        if key in ours:  # fragless has every DeviceStats key; torch adds a few of its own
            assert value == ours[key], key
    assert theirs["allocation.all.current"] >= len(keep)
    assert theirs["reserved_bytes.all.current"] >= theirs["allocated_bytes.all.current"]


def test_memory_summary_and_snapshot():
    keep = torch.empty(3 << 18, device="cuda")
    summary = torch.cuda.memory_summary()
    assert "Allocated memory" in summary
    assert "fragless" in fragless.memory_summary().lower() or "Allocated" in fragless.memory_summary()
    segments = torch.cuda.memory_snapshot()
    assert sum(s["total_size"] for s in segments) == torch.cuda.memory_reserved()
    assert sum(s["allocated_size"] for s in segments) == torch.cuda.memory_allocated()
    assert any(b["address"] == keep.data_ptr() and b["state"] == "active_allocated"
               for s in segments for b in s["blocks"])


def test_empty_cache_returns_memory():
    tensor = torch.empty(16 << 20, device="cuda")
    del tensor
    assert torch.cuda.memory_reserved() > torch.cuda.memory_allocated()
    torch.cuda.empty_cache()
    assert torch.cuda.memory_reserved() == figures()["reserved_bytes.all.current"]
    assert figures()["reserved_bytes.all.current"] - figures()["allocated_bytes.all.current"] == 0


def test_compact_releases_free_pages():
    torch.cuda.empty_cache()
    keep = torch.empty(1 << 20, device="cuda")
    tensor = torch.empty(32 << 20, device="cuda")
    reserved_before = torch.cuda.memory_reserved()
    del tensor
    result = fragless.compact()
    # Every free page goes except at most four kept for reuse (docs/compaction.md).
    assert result.unmapped_pages >= (32 << 20) // (2 << 20) - 4
    assert result.released_bytes == reserved_before - torch.cuda.memory_reserved()
    assert torch.cuda.memory_reserved() - torch.cuda.memory_allocated() <= 4 * (2 << 20) + (2 << 20)
    assert figures()["num_compactions"] >= 1
    del keep


def test_record_history_and_dump_snapshot(tmp_path):
    torch.cuda.empty_cache()  # nothing mapped: the tensors below map pages while recording
    with recorded_history(max_entries=1000):
        a = torch.empty(1000, device="cuda")
        b = torch.empty(2 << 20, device="cuda")
        address = a.data_ptr()
        del a
        snapshot = dump_and_load_snapshot(tmp_path / "snapshot.pickle")
    trace = snapshot["device_traces"][0]
    actions = [(e["action"], e["addr"]) for e in trace]
    assert ("alloc", address) in actions
    assert ("free_requested", address) in actions
    assert ("free_completed", address) in actions
    assert any(e["action"] == "alloc" and e["addr"] == b.data_ptr() and e["size"] == 8 << 20 for e in trace)
    assert any(e.get("frames") for e in trace)  # stacks were recorded (segment entries have none)
    # The pages under b were mapped while recording: segment_map entries cover it.
    b_start, b_end = b.data_ptr(), b.data_ptr() + (8 << 20)
    mapped = sum(min(b_end, e["addr"] + e["size"]) - max(b_start, e["addr"])
                 for e in trace if e["action"] == "segment_map" and e["addr"] < b_end and e["addr"] + e["size"] > b_start)
    assert mapped == 8 << 20
    assert snapshot["segments"]
    # memory_viz's own reader accepts it.
    from torch.cuda import _memory_viz

    assert "<html" in _memory_viz.trace_plot(snapshot).lower()


def test_record_stream_on_side_stream():
    side = torch.cuda.Stream()
    tensor = torch.empty(1 << 20, device="cuda")
    with torch.cuda.stream(side):
        tensor.fill_(1.0)
    tensor.record_stream(side)
    address = tensor.data_ptr()
    del tensor
    side.synchronize()
    with torch.cuda.stream(side):
        on_side = torch.empty(1 << 20, device="cuda")
    assert on_side.data_ptr() != 0
    assert torch.cuda.memory_allocated() >= (1 << 20) * 4
    del on_side
    assert address != 0


def test_out_of_memory_is_torch_out_of_memory_error():
    ooms = figures()["num_ooms"]
    with pytest.raises(torch.OutOfMemoryError) as caught:
        torch.empty(1 << 48, dtype=torch.uint8, device="cuda")
    assert str(caught.value).startswith("CUDA out of memory")
    assert torch.cuda.memory_stats()["num_ooms"] == ooms + 1


class Elementwise(torch.nn.Module):
    """Layers without cuBLAS/cuDNN (simcuda has neither): scale, norm, activation."""

    def __init__(self, width):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(width))
        self.shift = torch.nn.Parameter(torch.zeros(width))
        self.norm = torch.nn.LayerNorm(width)

    def forward(self, x):
        return torch.relu(self.norm(x * self.scale + self.shift))


def test_training_steps_allocate_through_fragless():
    model = torch.nn.Sequential(Elementwise(256), Elementwise(256)).cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    torch.cuda.reset_peak_memory_stats()
    allocations_before = figures()["allocation.all.allocated"]
    for _ in range(3):
        loss = model(torch.randn(64, 256, device="cuda")).sum()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    assert figures()["allocation.all.allocated"] > allocations_before + 10
    assert torch.cuda.max_memory_allocated() > 64 * 256 * 4
    assert all(p.grad is None or p.grad.is_cuda for p in model.parameters())


def test_profiler_sees_fragless_allocations():
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as profiler:
        tensor = torch.empty(1 << 20, device="cuda")
        del tensor
    # The allocation is attributed to aten::empty, the free to a "[memory]" event.
    usage = [(e.name, e.device_memory_usage) for e in profiler.events()]
    assert ("aten::empty", 4 << 20) in usage
    assert ("[memory]", -(4 << 20)) in usage


def test_mem_pool_keeps_its_memory():
    pool = torch.cuda.MemPool()
    assert pool.use_count() == 1
    outside = torch.empty(1 << 20, device="cuda")
    with torch.cuda.use_mem_pool(pool):
        assert pool.use_count() == 2
        inside = torch.empty(1 << 20, device="cuda")
        small_inside = torch.empty(100, device="cuda")
    assert pool.use_count() == 1

    def owner(tensor):
        address = tensor.data_ptr()
        for segment in torch.cuda.memory_snapshot():
            if segment["address"] <= address < segment["address"] + segment["total_size"]:
                return tuple(segment["segment_pool_id"])
        return None

    assert owner(inside) == pool.id
    assert owner(small_inside) == pool.id
    assert owner(outside) == (0, 0)
    # The pool's own snapshot holds exactly its segments, with its blocks.
    pool_segments = pool.snapshot(include_traces=False)
    assert pool_segments and all(tuple(s["segment_pool_id"]) == pool.id for s in pool_segments)
    sizes = sorted(b["requested_size"] for s in pool_segments for b in s["blocks"] if b["state"] == "active_allocated")
    assert sizes == [400, 4 << 20]
    # memory_allocated counts pool memory too.
    assert torch.cuda.memory_allocated() == figures()["allocated_bytes.all.current"]
    # Memory the pool frees is not handed out outside it.
    inside_address = inside.data_ptr()
    del inside
    again = torch.empty(1 << 20, device="cuda")
    assert owner(again) == (0, 0) and again.data_ptr() != inside_address
    del small_inside, again, outside, pool  # the pool ends; its memory goes back
    torch.cuda.empty_cache()
    assert all(tuple(s["segment_pool_id"]) == (0, 0) for s in torch.cuda.memory_snapshot())


def test_cuda_graph_capture_and_replay():
    # simcuda emulates stream capture: a capture that made a forbidden call (fragless's own
    # device calls included) would fail at capture_end with cudaErrorStreamCaptureInvalidated.
    static_in = torch.zeros(1000, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        warm = static_in * 2
    torch.cuda.current_stream().wait_stream(side)
    del warm
    graph, static_out = capture_copy_graph(static_in)
    assert segment_pool_id(static_out) == graph.pool()  # allocated during capture: in the graph's pool
    static_in.copy_(torch.full((1000,), 5.0))
    graph.replay()
    assert float(static_out.cpu().sum()) == 5000.0  # the copy ran at replay
    static_in.copy_(torch.full((1000,), 2.0))
    graph.replay()
    assert float(static_out.cpu().sum()) == 2000.0
    del static_out, graph
    assert only_device_pool_left()


def test_unsupported_pool_kinds_refused_with_reason():
    with pytest.raises(RuntimeError, match="no_split"):
        torch.cuda.MemPool(no_split=True)


def test_accelerator_api_reads_fragless():
    keep = torch.empty(1000, device="cuda")
    assert torch.accelerator.memory_allocated() == figures()["allocated_bytes.all.current"]
    assert torch.accelerator.memory_stats()["allocation.all.current"] == figures()["allocation.all.current"]
    assert keep.is_cuda


def test_memory_fraction_limits_fragless():
    torch.cuda.set_per_process_memory_fraction(0.25)
    try:
        assert torch.cuda.get_per_process_memory_fraction() == 0.25
        total = torch.cuda.get_device_properties(0).total_memory
        with pytest.raises(torch.OutOfMemoryError):
            torch.empty(total // 2, dtype=torch.uint8, device="cuda")
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
    big = torch.empty(total // 2, dtype=torch.uint8, device="cuda")
    assert torch.cuda.memory_allocated() >= total // 2
    del big
    torch.cuda.empty_cache()


def test_reset_peak_memory_stats():
    tensor = torch.empty(8 << 20, device="cuda")
    del tensor
    assert torch.cuda.max_memory_allocated() >= 32 << 20
    torch.cuda.reset_peak_memory_stats()
    assert torch.cuda.max_memory_allocated() == torch.cuda.memory_allocated()
    assert figures()["allocated_bytes.all.peak"] == torch.cuda.memory_allocated()
