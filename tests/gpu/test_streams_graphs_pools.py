"""Stream-ordered reuse, CUDA graphs and private pools through fragless.

The record_stream check plants a late write on a side stream into a tensor, frees the
tensor, and fills a new tensor on the main stream: if fragless handed the memory out before
the side stream's work, the late write lands in the new tensor. On a GPU the late write is
torch.cuda._sleep followed by fill_; on simcuda it is a simulated kernel that writes when it
completes (simcuda_launch_fill), and simcuda's race oracle must stay silent. simcuda moves a
copy's bytes when it is enqueued, not when its stream reaches it, so there a copy ordered
after the late write (the correct reuse, through an event wait) would still see the late
write land after it: on simcuda the value check applies only when the memory was not reused,
and the race oracle judges reuse.
"""
import ctypes

import pytest
import torch

import fragless
from torch_suite_steps import capture_copy_graph, only_device_pool_left, segment_pool_id, segment_pool_ids

LATE_BYTE = 0xAB


def plant_late_write(tensor: torch.Tensor, stream: torch.cuda.Stream, on_simcuda: bool) -> None:
    if on_simcuda:
        simcuda = ctypes.CDLL("libcuda.so.1")
        simcuda.simcuda_launch_fill.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint8]
        simcuda.simcuda_launch_fill.restype = ctypes.c_uint64
        assert simcuda.simcuda_launch_fill(stream.cuda_stream, tensor.data_ptr(), tensor.numel(), LATE_BYTE) != 0
    else:
        with torch.cuda.stream(stream):
            torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU cycles before the write
            tensor.fill_(LATE_BYTE)


def race_count(on_simcuda: bool) -> int:
    if not on_simcuda:
        return 0
    simcuda = ctypes.CDLL("libcuda.so.1")
    simcuda.simcuda_race_count.restype = ctypes.c_uint64
    return simcuda.simcuda_race_count()


def complete_everything(on_simcuda: bool) -> None:
    if on_simcuda:
        ctypes.CDLL("libcuda.so.1").simcuda_complete_all()
    torch.cuda.synchronize()


@pytest.mark.parametrize("size_bytes", [4096, 48 << 10, 8 << 20])  # slab classes and the large pool
def test_record_stream_memory_reused_only_after_the_streams_work(on_simcuda, size_bytes):
    races_before = race_count(on_simcuda)
    side = torch.cuda.Stream()
    zeros = torch.zeros(size_bytes, dtype=torch.uint8)
    for _ in range(4):
        doomed = torch.empty(size_bytes, dtype=torch.uint8, device="cuda")
        side.wait_stream(torch.cuda.current_stream())
        plant_late_write(doomed, side, on_simcuda)
        doomed.record_stream(side)
        doomed_address = doomed.data_ptr()
        del doomed
        fresh = torch.empty(size_bytes, dtype=torch.uint8, device="cuda")
        fresh.copy_(zeros)  # on the main stream
        reused = abs(fresh.data_ptr() - doomed_address) < size_bytes
        complete_everything(on_simcuda)
        if not (on_simcuda and reused):
            assert int(fresh.cpu().max()) == 0, "the side stream's late write landed in reused memory"
        del fresh
    assert race_count(on_simcuda) == races_before


def test_cuda_graph_capture_replay_and_pool():
    pools_before = segment_pool_ids()
    static_in = torch.zeros(1000, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        static_in.add_(0)  # warm-up outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph, static_out = capture_copy_graph(static_in)
    assert segment_pool_id(static_out) == graph.pool()
    for value in (5.0, 2.0):
        static_in.copy_(torch.full((1000,), value))
        graph.replay()
        torch.cuda.synchronize()
        assert float(static_out.cpu().sum()) == 1000 * value
    del static_out, graph
    assert only_device_pool_left(pools_before)


@pytest.mark.needs_kernels("the captured kernels' output")
def test_cuda_graph_of_a_model_gives_eager_output():
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 64)).cuda()
    static_in = torch.randn(32, 256, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            model(static_in)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = model(static_in)
    for seed in range(3):
        batch = torch.randn(32, 256, generator=torch.Generator().manual_seed(seed)).cuda()
        static_in.copy_(batch)
        graph.replay()
        torch.cuda.synchronize()
        with torch.no_grad():
            assert torch.allclose(static_out, model(batch), rtol=1e-5, atol=1e-5)


def test_mem_pool_holds_its_own_memory():
    pools_before = segment_pool_ids()
    pool = torch.cuda.MemPool()
    outside = torch.empty(1 << 20, device="cuda")
    with torch.cuda.use_mem_pool(pool):
        inside = torch.empty(1 << 20, device="cuda")
        small_inside = torch.tensor([1.0, 2.0, 3.0]).cuda()

    def owner(tensor):
        for segment in torch.cuda.memory_snapshot():
            if segment["address"] <= tensor.data_ptr() < segment["address"] + segment["total_size"]:
                return tuple(segment["segment_pool_id"])

    assert owner(inside) == pool.id and owner(small_inside) == pool.id
    assert owner(outside) == (0, 0)
    assert small_inside.cpu().tolist() == [1.0, 2.0, 3.0]
    inside_address = inside.data_ptr()
    del inside
    again = torch.empty(1 << 20, device="cuda")  # outside the pool: never the pool's memory
    assert owner(again) == (0, 0) and again.data_ptr() != inside_address
    assert torch.cuda.memory_allocated() == fragless.stats()["allocated_bytes.all.current"]
    del small_inside, again, outside, pool
    assert only_device_pool_left(pools_before)
