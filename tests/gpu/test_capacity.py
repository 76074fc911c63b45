"""The device's capacity through fragless: an impossible request is a torch.OutOfMemoryError
and the process goes on; the whole device can be filled with 1 GiB tensors and given back;
a per-process memory fraction is enforced. (On simcuda the device is SIMCUDA_MEMORY, 8 GiB
by default in this suite, and untouched memory costs the host nothing.)"""
import pytest
import torch

import fragless

GIB = 1 << 30


def device_free_bytes() -> int:
    return torch.cuda.mem_get_info()[0]


def test_impossible_request_is_out_of_memory_error_and_process_goes_on():
    ooms = fragless.stats()["num_ooms"]
    with pytest.raises(torch.OutOfMemoryError) as caught:
        torch.empty(1 << 50, dtype=torch.uint8, device="cuda")
    assert str(caught.value).startswith("CUDA out of memory")
    assert torch.cuda.memory_stats()["num_ooms"] == ooms + 1
    # The process goes on: allocation and copies still work.
    values = torch.arange(1 << 20, dtype=torch.int32)
    assert torch.equal(values.cuda().cpu(), values)


def test_fill_device_with_1gib_tensors_and_give_it_back():
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    free_before = device_free_bytes()
    tensors = []
    with pytest.raises(torch.OutOfMemoryError):
        while len(tensors) < 4096:
            tensors.append(torch.empty(GIB, dtype=torch.uint8, device="cuda"))
    filled = len(tensors) * GIB
    assert filled >= 0.9 * free_before, f"{len(tensors)} GiB of {free_before / GIB:.2f} GiB free"
    # Every tensor is usable: write and read a few bytes at both ends.
    probe = torch.arange(256, dtype=torch.uint8)
    for tensor in (tensors[0], tensors[-1]):
        tensor[:256].copy_(probe)
        tensor[-256:].copy_(probe)
        assert torch.equal(tensor[:256].cpu(), probe) and torch.equal(tensor[-256:].cpu(), probe)
    del tensors, tensor
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    free_after = device_free_bytes()
    # Back, up to a few pages fragless's small-block slabs may still hold for live tensors.
    assert free_after >= free_before - 64 * (1 << 20), (free_before, free_after)
    assert torch.cuda.memory_reserved() - torch.cuda.memory_allocated() <= 64 * (1 << 20)


def test_per_process_memory_fraction_is_enforced():
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.empty_cache()
    torch.cuda.set_per_process_memory_fraction(0.25)
    try:
        assert torch.cuda.get_per_process_memory_fraction() == 0.25
        within = torch.empty(total // 8, dtype=torch.uint8, device="cuda")
        with pytest.raises(torch.OutOfMemoryError):
            torch.empty(total // 4, dtype=torch.uint8, device="cuda")  # with `within`: over a quarter
        del within
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
    big = torch.empty(total // 2, dtype=torch.uint8, device="cuda")  # lifted again
    assert torch.cuda.memory_allocated() >= total // 2
    del big
    torch.cuda.empty_cache()


def test_profiler_shows_cuda_memory(on_simcuda):
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([] if on_simcuda else [ProfilerActivity.CUDA])
    with profile(activities=activities, profile_memory=True) as profiler:
        tensor = torch.empty(1 << 20, device="cuda")
        del tensor
    usage = [(e.name, e.device_memory_usage) for e in profiler.events()]
    assert ("aten::empty", 4 << 20) in usage
    assert ("[memory]", -(4 << 20)) in usage
    averages = {e.key: e.self_device_memory_usage for e in profiler.key_averages()}
    assert averages["aten::empty"] == 4 << 20
