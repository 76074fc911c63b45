"""torch.compile with fragless installed: default mode (Inductor's Triton kernels) and
mode="reduce-overhead" (CUDA graph trees, which allocate from a private pool) give the eager
results. Both need kernels compiled for and run on the device."""
import pytest
import torch


def model_and_input():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.GELU(), torch.nn.LayerNorm(256),
                                torch.nn.Linear(256, 64)).cuda()
    return model, torch.randn(16, 128, device="cuda")


@pytest.mark.needs_kernels("torch.compile generates and runs Triton kernels")
@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_compiled_model_gives_eager_results(mode):
    pytest.importorskip("triton", reason="torch.compile's GPU backend needs Triton")
    torch.set_float32_matmul_precision("highest")
    model, example = model_and_input()
    with torch.no_grad():
        expected = model(example).clone()
        compiled = torch.compile(model, mode=mode)
        for _ in range(3):  # reduce-overhead records its graph after warm-up runs
            result = compiled(example).clone()
    torch.cuda.synchronize()
    assert torch.allclose(result, expected, rtol=1e-4, atol=1e-4)
    assert torch.cuda.get_allocator_backend() == "fragless"
    # And training through the compiled module (backward graphs too).
    compiled_train = torch.compile(model, mode=mode)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(4):
        loss = compiled_train(example).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(float(loss))
    assert losses[-1] < losses[0]
