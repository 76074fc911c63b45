"""The training comparison's workloads, run one (workload, mode) per process by compare.py.
Real models with random weights, nothing downloaded:
  gpt2-train     GPT-2 124M (transformers' GPT2Config when importable, else a built-in
                 GPT-2 of the same shape), AdamW, bf16 autocast, batches of varying length;
  resnet50-train ResNet-50 (torchvision when importable, else a built-in one of the same
                 shape), AMP (fp16 + GradScaler), varying batch size and resolution;
  gpt2-generate  greedy generation with a KV cache, varying prompt and output lengths;
  smoke          an elementwise model (no cuBLAS): the harness itself, on simcuda.

Invariant: a worker's figures cover only its own process and mode; the same seeds give every
mode the same batches, so losses (or generated tokens) are comparable across modes.

usage (by compare.py): FRAGLESS_MODE=<mode> python compare_workloads.py <workload> <steps>
prints one JSON line: step_seconds, losses, peak_used_bytes, baseline_used_bytes, ...
"""
import json
import math
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
import allocator_modes  # noqa: E402

NEEDS_KERNELS = {"gpt2-train", "resnet50-train", "gpt2-generate"}
WORKLOADS = ("gpt2-train", "resnet50-train", "gpt2-generate", "smoke")
# Steps after which every workload has seen each of its shapes once (its cycle of sequence
# lengths, batch sizes or prompt lengths): until then every step meets new shapes, new
# kernels and new block sizes, so compare.py leaves them out of the step time.
SHAPE_CYCLE_STEPS = {"gpt2-train": 8, "resnet50-train": 5, "gpt2-generate": 5, "smoke": 4}


class PeakSampler:
    """Polls the driver's device memory in use every millisecond from a thread (ctypes calls
    release the GIL), plus at every step end: a sampled peak."""

    def __init__(self):
        self.peak = allocator_modes.device_used_bytes()
        self.error = None
        self._context = allocator_modes.current_context()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        try:
            allocator_modes.use_context(self._context)  # the driver's context is per thread
            while not self._stop.wait(0.001):
                self.sample()
        except RuntimeError as failure:  # reported with the results; step-end samples go on
            self.error = str(failure)

    def sample(self):
        self.peak = max(self.peak, allocator_modes.device_used_bytes())

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.sample()


# ---- a built-in GPT-2 (used when transformers is not importable, and for generation) ----

def builtin_gpt2(torch, layers=12, heads=12, width=768, vocab=50257, positions=1024):
    nn, functional = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(width), nn.LayerNorm(width)
            self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
            self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(approximate="tanh"),
                                     nn.Linear(4 * width, width))

        def forward(self, x, cache=None):
            batch, length, _ = x.shape
            q, k, v = self.qkv(self.ln_1(x)).split(width, dim=2)
            q, k, v = (t.view(batch, length, heads, width // heads).transpose(1, 2) for t in (q, k, v))
            if cache is not None:  # the KV cache grows by concatenation, one step at a time
                if cache:
                    k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
                cache[:] = [k, v]
            attended = functional.scaled_dot_product_attention(q, k, v, is_causal=cache is None or length > 1)
            x = x + self.proj(attended.transpose(1, 2).reshape(batch, length, width))
            return x + self.mlp(self.ln_2(x))

    class GPT2(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(positions, width)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln_f = nn.LayerNorm(width)
            for embedding, std in ((self.wte, 0.02), (self.wpe, 0.01)):  # GPT-2's initialisation
                nn.init.normal_(embedding.weight, std=std)

        def forward(self, ids, caches=None, start=0):
            x = self.wte(ids) + self.wpe(torch.arange(start, start + ids.shape[1], device=ids.device))
            for index, block in enumerate(self.blocks):
                x = block(x, None if caches is None else caches[index])
            return self.ln_f(x) @ self.wte.weight.t()

    return GPT2()


def gpt2_model(torch):
    try:
        from transformers import GPT2Config, GPT2LMHeadModel

        return GPT2LMHeadModel(GPT2Config()), "transformers GPT2Config() (124M)"
    except ImportError:
        return builtin_gpt2(torch), "built-in GPT-2 124M (transformers not importable)"


def gpt2_loss(torch, model, ids):
    if hasattr(model, "transformer"):  # transformers
        return model(input_ids=ids, labels=ids).loss
    logits = model(ids)
    return torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
                                             ids[:, 1:].reshape(-1))


def run_gpt2_train(torch, steps, sampler):
    model, name = gpt2_model(torch)
    model = model.cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    lengths = [128, 512, 256, 1024, 384, 768, 64, 896]
    for step in range(steps):
        length = lengths[step % len(lengths)]
        ids = torch.randint(0, 50257, (8, length), generator=torch.Generator().manual_seed(step)).cuda()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = gpt2_loss(torch, model, ids)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        yield name, float(loss.detach())


def builtin_resnet50(torch):
    nn = torch.nn

    class Bottleneck(nn.Module):
        def __init__(self, inputs, width, stride):
            super().__init__()
            outputs = 4 * width
            self.body = nn.Sequential(
                nn.Conv2d(inputs, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
                nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
                nn.Conv2d(width, outputs, 1, bias=False), nn.BatchNorm2d(outputs))
            self.skip = nn.Identity() if stride == 1 and inputs == outputs else nn.Sequential(
                nn.Conv2d(inputs, outputs, 1, stride, bias=False), nn.BatchNorm2d(outputs))

        def forward(self, x):
            return torch.relu(self.body(x) + self.skip(x))

    layers, inputs = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                      nn.MaxPool2d(3, 2, 1)], 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for index in range(blocks):
            layers.append(Bottleneck(inputs, width, stride if index == 0 else 1))
            inputs = 4 * width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000)]
    return nn.Sequential(*layers)


def run_resnet50_train(torch, steps, sampler):
    try:
        import torchvision

        model, name = torchvision.models.resnet50(weights=None), "torchvision resnet50"
    except ImportError:
        model, name = builtin_resnet50(torch), "built-in ResNet-50 (torchvision not importable)"
    model = model.cuda().to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda")
    shapes = [(64, 224), (32, 288), (128, 160), (16, 320), (96, 192)]
    for step in range(steps):
        batch, resolution = shapes[step % len(shapes)]
        generator = torch.Generator().manual_seed(step)
        images = torch.randn(batch, 3, resolution, resolution, generator=generator).cuda()
        labels = torch.randint(0, 1000, (batch,), generator=generator).cuda()
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.cross_entropy(model(images.to(memory_format=torch.channels_last)), labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        yield name, float(loss.detach())


def run_gpt2_generate(torch, steps, sampler):
    torch.manual_seed(0)
    model = builtin_gpt2(torch).cuda().eval().to(torch.bfloat16)
    plan = [(32, 256), (200, 64), (8, 512), (400, 128), (64, 384)]  # (prompt, new tokens)
    with torch.no_grad():
        for step in range(steps):
            prompt_length, new_tokens = plan[step % len(plan)]
            ids = torch.randint(0, 50257, (4, prompt_length), generator=torch.Generator().manual_seed(step)).cuda()
            caches = [[] for _ in model.blocks]
            logits = model(ids, caches, 0)
            produced = []
            for position in range(prompt_length, prompt_length + new_tokens):
                token = logits[:, -1].argmax(dim=-1, keepdim=True)
                produced.append(token)
                logits = model(token, caches, position)
            tokens = torch.cat(produced, dim=1).cpu()
            # A number per step that matches iff the generated tokens match.
            yield "built-in GPT-2 124M, greedy, KV cache", float(tokens.double().mul(
                torch.arange(1, tokens.numel() + 1, dtype=torch.float64).view_as(tokens)).sum() % 1_000_003)
            sampler.sample()


def run_smoke(torch, steps, sampler):
    width = 1024
    model = torch.nn.Sequential(torch.nn.LayerNorm(width), torch.nn.ReLU(), torch.nn.LayerNorm(width)).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(steps):
        rows = (256, 2048, 512, 4096)[step % 4]
        batch = torch.randn(rows, width, generator=torch.Generator().manual_seed(step)).cuda()
        loss = model(batch).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        yield "elementwise (harness smoke)", float(loss.detach())


RUNNERS = {"gpt2-train": run_gpt2_train, "resnet50-train": run_resnet50_train,
           "gpt2-generate": run_gpt2_generate, "smoke": run_smoke}


def main(workload: str, steps: int) -> int:
    mode = allocator_modes.current_mode()
    import torch

    allocator_modes.activate(mode)
    torch.cuda.init()
    torch.zeros(1, device="cuda")  # context and allocator up: the baseline
    torch.cuda.synchronize()
    baseline = allocator_modes.device_used_bytes()
    result = {"workload": workload, "mode": mode, "losses": [], "step_seconds": []}
    try:
        with PeakSampler() as sampler:
            start = time.perf_counter()
            for name, loss in RUNNERS[workload](torch, steps, sampler):
                torch.cuda.synchronize()
                sampler.sample()
                now = time.perf_counter()
                result["step_seconds"].append(now - start)
                result["losses"].append(loss if math.isfinite(loss) else None)
                result["model"] = name
                start = time.perf_counter()
        result["peak_used_bytes"] = sampler.peak
        if sampler.error:
            result["sampler_error"] = sampler.error
    except torch.OutOfMemoryError as failure:
        result["error"] = "OutOfMemoryError: " + str(failure).splitlines()[0]
    result["baseline_used_bytes"] = baseline
    result["backend"] = allocator_modes.backend(mode)
    result["max_reserved_bytes"] = allocator_modes.max_reserved_bytes(mode)
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2])))
