"""Values in fragless memory: cuBLAS results against a float64 reference, and thousands of
tensors of random sizes whose contents must survive other tensors' allocation and frees
(Note [Checks on simcuda] in conftest.py: the contents go in and out by copies, which simcuda
performs).
"""
import random

import pytest
import torch

import fragless


@pytest.mark.needs_kernels("cuBLAS matmul output")
@pytest.mark.parametrize("shape", [(64, 64, 64), (1000, 777, 513), (4096, 4096, 1024)])
def test_matmul_matches_float64_reference(shape):
    torch.set_float32_matmul_precision("highest")
    m, k, n = shape
    generator = torch.Generator().manual_seed(m * 7 + n)
    a = torch.randn(m, k, generator=generator)
    b = torch.randn(k, n, generator=generator)
    product = (a.cuda() @ b.cuda()).cpu()
    reference = (a.double() @ b.double()).float()
    assert torch.allclose(product, reference, rtol=1e-4, atol=1e-3 * k ** 0.5)
    assert torch.cuda.get_allocator_backend() == "fragless"


def pattern(index: int, count: int) -> torch.Tensor:
    """A tensor's known contents: its index in every element, plus the position, so that a
    block handed out twice or shifted shows up as wrong values."""
    return torch.arange(count, dtype=torch.int32).mul_(7).add_(index * 1_000_003)


def test_random_size_tensors_keep_their_values(on_simcuda):
    rng = random.Random(18)
    max_elements = (1 << 16) if on_simcuda else (1 << 22)  # up to 256 KiB / 16 MiB each
    count = 3000
    allocations_before = fragless.stats()["allocation.all.allocated"]
    live = {}
    for index in range(count):
        elements = max(1, int(2 ** rng.uniform(0, max_elements.bit_length() - 1)))
        live[index] = pattern(index, elements).cuda()
        if index % 3 == 2:  # free a random earlier tensor now and then
            del live[rng.choice(list(live))]
    # A second wave reuses the freed memory.
    for index in range(count, count + count // 3):
        live[index] = pattern(index, max(1, int(2 ** rng.uniform(0, 16)))).cuda()
    torch.cuda.synchronize()
    assert fragless.stats()["allocation.all.allocated"] - allocations_before >= count + count // 3
    wrong = [index for index, tensor in live.items() if not torch.equal(tensor.cpu(), pattern(index, tensor.numel()))]
    assert not wrong, f"{len(wrong)} of {len(live)} surviving tensors changed, first {wrong[:5]}"
    # No two survivors share memory.
    spans = sorted((t.data_ptr(), t.data_ptr() + t.numel() * 4) for t in live.values())
    assert all(end <= next_start for (_, end), (next_start, _) in zip(spans, spans[1:]))


@pytest.mark.needs_kernels("kernel-written contents (fill_, arithmetic)")
def test_kernel_written_tensors_keep_their_values():
    rng = random.Random(7)
    live = {}
    for index in range(2000):
        tensor = torch.empty(max(1, int(2 ** rng.uniform(0, 20))), dtype=torch.int32, device="cuda")
        tensor.fill_(index)
        live[index] = tensor
        if index % 2 == 1:
            del live[rng.choice(list(live))]
    for index, tensor in live.items():
        assert int(tensor.min()) == index == int(tensor.max())
