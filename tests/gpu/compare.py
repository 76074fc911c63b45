#!/usr/bin/env python3
"""The training comparison (`scripts/dev.sh gpu --compare`): each workload of
compare_workloads.py under each allocator mode of allocator_modes.py, one process per
(workload, mode, repetition). Writes results.json, a markdown table (table.md) and a plot
(peak-memory.svg) to --out, and prints the table.

Per (workload, mode): peak device memory in use above the process's CUDA context (sampled
from the driver's cuMemGetInfo: comparable across all modes), the allocator's own max
reserved bytes where the mode reports it, the median step time (warm-up left out: the steps
of the workload's first cycle of shapes, compare_workloads.SHAPE_CYCLE_STEPS; the
median over repetitions of each run's median), and whether the losses (generation: the
generated tokens) match PyTorch's run. On simcuda only the `smoke` workload runs (the others
need cuBLAS and kernels) and its times and losses mean nothing: simcuda runs no kernels.

usage: compare.py [--workloads a,b] [--modes a,b] [--steps N] [--repetitions R] [--out DIR]
"""
import argparse
import html
import importlib.metadata
import json
import os
import pathlib
import statistics
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import allocator_modes  # noqa: E402
import compare_workloads  # noqa: E402
import suite_environment  # noqa: E402

MIB = 1 << 20


def run_one(workload: str, mode: str, steps: int) -> dict:
    environment = allocator_modes.mode_environment(mode, os.environ)
    result = subprocess.run([sys.executable, str(HERE / "compare_workloads.py"), workload, str(steps)],
                            capture_output=True, text=True, timeout=3600, env=environment)
    for line in result.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    tail = (result.stdout + result.stderr).strip().splitlines()[-5:]
    return {"workload": workload, "mode": mode, "error": f"exit {result.returncode}: " + " | ".join(tail)}


def losses_match(losses, reference) -> str:
    if not losses or not reference or len(losses) != len(reference):
        return "-"
    if any(v is None for v in losses + reference):
        return "non-finite"
    worst = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(losses, reference))
    return "yes (exact)" if worst == 0 else ("yes" if worst <= 1e-2 else "no") + f" (max rel. diff {worst:.1e})"


def match_column(mode: str, figures, reference, on_gpu: bool) -> str:
    if mode == "pytorch":
        return "(reference)"
    if not on_gpu:
        return "n/a (simcuda runs no kernels)"
    return losses_match(figures["losses"], reference)


def summarise(runs) -> dict:
    """Runs of one (workload, mode): medians over repetitions."""
    good = [r for r in runs if "error" not in r and r.get("step_seconds")]
    if not good:
        return {"error": runs[0].get("error", "no steps") if runs else "not run"}
    warmup = compare_workloads.SHAPE_CYCLE_STEPS.get(good[0]["workload"], 2)
    step_medians = [statistics.median(r["step_seconds"][warmup:] or r["step_seconds"]) for r in good]
    reserved = [r["max_reserved_bytes"] for r in good if r.get("max_reserved_bytes") is not None]
    return {"peak_used_bytes": statistics.median(r["peak_used_bytes"] - r["baseline_used_bytes"] for r in good),
            "max_reserved_bytes": statistics.median(reserved) if reserved else None,
            "step_seconds": statistics.median(step_medians), "losses": good[0]["losses"],
            "model": good[0].get("model", ""), "backend": good[0].get("backend", ""), "runs": len(good),
            "sampler_error": next((r["sampler_error"] for r in good if r.get("sampler_error")), None)}


def markdown(summary, device: str, skipped, on_gpu: bool) -> str:
    lines = [f"Device: {device}", "",
             "| workload | mode | peak device memory in use | max reserved (allocator) | median step | "
             "losses match PyTorch |", "|---|---|---:|---:|---:|---|"]
    for workload, modes in summary.items():
        reference = modes.get("pytorch", {}).get("losses")
        for mode, figures in modes.items():
            if "error" in figures:
                lines.append(f"| {workload} | {mode} | error: {figures['error'][:120]} | | | |")
                continue
            reserved = figures["max_reserved_bytes"]
            lines.append(f"| {workload} | {mode} | {figures['peak_used_bytes'] / MIB:,.0f} MiB | "
                         f"{'-' if reserved is None else f'{reserved / MIB:,.0f} MiB'} | "
                         f"{figures['step_seconds'] * 1000:.1f} ms | "
                         f"{match_column(mode, figures, reference, on_gpu)} |")
    lines.append("")
    for workload, modes in summary.items():
        models = {f.get("model") for f in modes.values() if f.get("model")}
        lines.append(f"- {workload}: {', '.join(sorted(models))}")
    for workload, modes in summary.items():
        for mode, figures in modes.items():
            if figures.get("sampler_error"):
                lines.append(f"- {workload} / {mode}: peak sampled at step ends only ({figures['sampler_error']})")
    for workload, reason in skipped.items():
        lines.append(f"- {workload}: skipped ({reason})")
    lines.append("- modes: " + "; ".join(f"`{m}` = {d}" for m, d in allocator_modes.DESCRIPTIONS.items()))
    return "\n".join(lines) + "\n"


def svg_plot(summary, title: str) -> str:
    """Grouped bars: peak device memory in use per workload, one bar per mode."""
    colours = ["#7f7f7f", "#bcbd22", "#1f77b4", "#17becf", "#2ca02c"]
    modes = list(allocator_modes.MODES)
    workloads = list(summary)
    top = max([f.get("peak_used_bytes", 0) for m in summary.values() for f in m.values()] + [1]) / MIB
    width, height, left, bottom, plot_height = 140 + 150 * max(1, len(workloads)), 360, 70, 300, 240
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
             f'font-size="11">', f'<text x="{left}" y="18" font-size="13">{html.escape(title)}</text>',
             f'<line x1="{left}" y1="{bottom}" x2="{width - 10}" y2="{bottom}" stroke="black"/>',
             f'<text x="8" y="{bottom - plot_height - 6}">MiB</text>']
    for tick in range(5):
        value = top * tick / 4
        y = bottom - plot_height * tick / 4
        parts.append(f'<text x="8" y="{y + 4:.0f}">{value:,.0f}</text>'
                     f'<line x1="{left}" y1="{y:.0f}" x2="{width - 10}" y2="{y:.0f}" stroke="#ddd"/>')
    for column, workload in enumerate(workloads):
        x0 = left + 10 + column * 150
        for index, mode in enumerate(modes):
            figures = summary[workload].get(mode, {})
            value = figures.get("peak_used_bytes", 0) / MIB
            bar = plot_height * value / top
            parts.append(f'<rect x="{x0 + index * 24}" y="{bottom - bar:.1f}" width="20" height="{bar:.1f}" '
                         f'fill="{colours[index]}"><title>{html.escape(mode)}: {value:,.0f} MiB</title></rect>')
        parts.append(f'<text x="{x0}" y="{bottom + 16}">{html.escape(workload)}</text>')
    for index, mode in enumerate(modes):
        parts.append(f'<rect x="{left + index * 120}" y="{bottom + 30}" width="10" height="10" '
                     f'fill="{colours[index]}"/><text x="{left + index * 120 + 14}" y="{bottom + 39}">'
                     f'{html.escape(mode)}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main(argv) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default="",
                        help=f"of {', '.join(compare_workloads.WORKLOADS)} (default: all but smoke on a GPU, "
                             "smoke on simcuda)")
    parser.add_argument("--modes", default=",".join(allocator_modes.MODES))
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--out", default=str(suite_environment.build_dir() / "gpu-compare"))
    options = parser.parse_args(argv)
    on_gpu, device = suite_environment.chosen_device()
    if not on_gpu:
        device = "simcuda (no kernels run: step times and losses mean nothing)"
    device += f"; torch {importlib.metadata.version('torch')}"
    workloads = [w for w in options.workloads.split(",") if w] or [
        w for w in compare_workloads.WORKLOADS if not (on_gpu and w == "smoke")]
    unknown = [w for w in workloads if w not in compare_workloads.WORKLOADS]
    if unknown:
        parser.error(f"unknown workloads {unknown}")
    skipped = {}
    if not on_gpu:
        skipped = {w: "needs cuBLAS and kernel output: simcuda runs no kernels"
                   for w in workloads if w in compare_workloads.NEEDS_KERNELS}
        workloads = [w for w in workloads if w not in skipped]
    modes = [m for m in options.modes.split(",") if m]
    if "pytorch" not in modes:
        modes.insert(0, "pytorch")  # the reference for the loss match
    summary = {}
    raw = []
    for workload in workloads:
        summary[workload] = {}
        for mode in modes:
            runs = []
            for repetition in range(options.repetitions):
                run = run_one(workload, mode, options.steps)
                outcome = run.get("error") or f"{len(run.get('losses', []))} steps"
                print(f"{workload} / {mode} / run {repetition + 1}: {outcome}", flush=True)
                runs.append(run)
            raw.extend(runs)
            summary[workload][mode] = summarise(runs)
    out = pathlib.Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    table = markdown(summary, device, skipped, on_gpu)
    (out / "results.json").write_text(json.dumps({"device": device, "runs": raw, "summary": summary}, indent=1))
    (out / "table.md").write_text(table)
    (out / "peak-memory.svg").write_text(svg_plot(summary, f"Peak device memory in use -- {device}"))
    print(table)
    print(f"wrote {out / 'table.md'}, {out / 'results.json'}, {out / 'peak-memory.svg'}")
    errors = [w for w, m in summary.items() for f in m.values() if "error" in f]
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
