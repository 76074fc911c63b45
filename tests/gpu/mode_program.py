"""One PyTorch program run unchanged under each allocator mode (allocator_modes.py): known
values through many allocations and frees, a few training steps, and -- on a GPU -- a matmul
against a float64 reference. Prints one JSON line of results; the test compares modes.

usage: FRAGLESS_MODE=<mode> python mode_program.py   (environment from mode_environment)
"""
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(__file__))
import allocator_modes  # noqa: E402
import suite_environment  # noqa: E402


def main() -> int:
    mode = allocator_modes.current_mode()
    import torch

    allocator_modes.activate(mode)
    on_simcuda = suite_environment.running_on_simcuda() if torch.cuda.is_available() else False
    results = {"mode": mode}
    rng = random.Random(5)
    live = {}
    for index in range(600):
        count = max(1, int(2 ** rng.uniform(0, 16)))
        live[index] = torch.arange(count, dtype=torch.int32).add_(index * 100_003).cuda()
        if index % 2:
            del live[rng.choice(list(live))]
    results["values_intact"] = all(
        torch.equal(t.cpu(), torch.arange(t.numel(), dtype=torch.int32).add_(i * 100_003)) for i, t in live.items())
    del live
    torch.manual_seed(0)
    width = 256
    if on_simcuda:  # no cuBLAS there: elementwise layers only
        model = torch.nn.Sequential(torch.nn.LayerNorm(width), torch.nn.ReLU(), torch.nn.LayerNorm(width)).cuda()
    else:
        model = torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(),
                                    torch.nn.Linear(4 * width, width)).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for step in range(5):
        batch = torch.randn(64, width, generator=torch.Generator().manual_seed(step)).cuda()
        loss = model(batch).float().pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(loss.detach().cpu()))
    results["losses"] = losses
    if not on_simcuda:
        torch.set_float32_matmul_precision("highest")
        a, b = torch.randn(512, 384, dtype=torch.float64), torch.randn(384, 256, dtype=torch.float64)
        product = (a.float().cuda() @ b.float().cuda()).cpu().double()
        results["matmul_max_error"] = float((product - a @ b).abs().max())
    torch.cuda.synchronize()
    results["backend"] = allocator_modes.backend(mode)
    results["fragless_figures"] = allocator_modes.fragless_figures(mode)
    results["max_reserved_bytes"] = allocator_modes.max_reserved_bytes(mode)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
