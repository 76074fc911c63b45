#!/usr/bin/env python3
"""Turns fragless-bench's results.json into the README's compact Markdown tables.

One row per workload: the ideal (peak live bytes, 512 B-rounded, rounded up to 2 MiB) and
each allocator's peak reserved bytes (over every repetition) as a multiple of it; the best replayed allocator of a
row in bold; geometric means at the bottom (over the workloads where every replayed
allocator ran ok, like fragless-bench's own summary rows), once over all workloads and once
over those whose ideal is at least 64 MiB (a 2 MiB page is a large share of a smaller one).
A second table gives the device calls: fragless's in the first replay, and every caching
allocator's steady-state calls per step (the last of the warm repetitions). A third gives
issue 16's goals for fragless, per group of workloads (the built-in generators, the shared
snapshots, the shared buffer-lifetime CSVs, all), with the columns and definitions of
`fragless-bench corpus`'s goals table (goals_table in bench/report/corpus_report.cpp), so
the two read alike. Above the tables,
the device the figures were measured on (results.json's "device", "counting" and
"capacity" lines; a results.json of earlier releases, a bare list of rows, has none).

    python3 scripts/bench_markdown.py build/bench-report/results.json
"""
import json
import math
import sys

ALLOCATORS = ["fragless", "fragless[noplan]", "fragless[moves]", "fragless[steady]", "pytorch", "pytorch-expandable", "cudamalloc", "pytorch-recorded", "ideal-packer"]
REPLAYED = ["fragless", "pytorch", "pytorch-expandable"]
STEADY = ["fragless", "fragless[noplan]", "fragless[moves]", "fragless[steady]", "pytorch", "pytorch-expandable"]


def in_order(names, present):
    """`names` that are present, with any other fragless[...] configuration of the run
    (a --conf NAME=... of the command) after the last fragless one."""
    known = [name for name in names if name in present]
    extra = sorted(name for name in present if name.startswith("fragless[") and name not in names)
    last = max((i for i, name in enumerate(known) if name.startswith("fragless")), default=-1)
    return known[: last + 1] + extra + known[last + 1 :]


def gib(value):
    return f"{value / 2**30:.2f} GiB" if value >= 2**30 else f"{value / 2**20:.0f} MiB"


def load_report(path):
    """(header lines, rows) of a results.json: a report object, or a bare list of rows."""
    with open(path) as f:
        report = json.load(f)
    if isinstance(report, list):
        return {}, report
    return {key: report.get(key, "") for key in ("device", "counting", "capacity")}, report["rows"]


def by_workload(rows):
    """The rows grouped by workload (trace), in first-seen order, without summary rows."""
    by_trace, order = {}, []
    for row in rows:
        if row["trace"].startswith("geomean"):
            continue
        if row["trace"] not in by_trace:
            order.append(row["trace"])
        by_trace.setdefault(row["trace"], {})[row["allocator"]] = row
    return by_trace, order


def main(path):
    _, rows = load_report(path)
    by_trace, order = by_workload(rows)
    present = {row["allocator"] for row in rows}
    allocators = in_order(ALLOCATORS, present)
    print("| workload | ideal | " + " | ".join(allocators) + " |")
    print("|---|---:|" + "---:|" * len(allocators))
    logs = {name: [] for name in allocators}
    large_logs = {name: [] for name in allocators}
    for trace in order:
        cells = by_trace[trace]
        ideal = next((r["ideal_bytes"] for r in cells.values() if r.get("ideal_bytes")), None)
        ratios = {}
        for name in allocators:
            row = cells.get(name)
            if row is None:
                continue
            if row["status"] != "ok" or row["ratio_to_ideal"] is None:
                ratios[name] = row["status"]
            else:
                ratios[name] = float(row["ratio_to_ideal"])
        replayed = [ratios[n] for n in REPLAYED if isinstance(ratios.get(n), float)]
        best = min(replayed) if replayed else None
        if all(isinstance(ratios.get(n), float) for n in REPLAYED + ["cudamalloc"]):
            for name, value in ratios.items():
                if isinstance(value, float) and value > 0:
                    logs[name].append(math.log(value))
                    if ideal and ideal >= 64 * 2**20:
                        large_logs[name].append(math.log(value))

        def cell(name):
            value = ratios.get(name)
            if value is None:
                return "-"
            if not isinstance(value, float):
                return value
            text = f"{value:.3f}"
            return f"**{text}**" if name in REPLAYED and value == best else text

        name = trace.replace("|", "/")
        print(f"| {name} | {gib(ideal) if ideal else '-'} | " + " | ".join(cell(n) for n in allocators) + " |")
    for label, table in (("all workloads", logs), ("workloads with ideal >= 64 MiB", large_logs)):
        means = []
        for name in allocators:
            values = table[name]
            means.append(f"{math.exp(sum(values) / len(values)):.3f} ({len(values)})" if values else "-")
        print(f"| **geometric mean**, {label} (count) | | " + " | ".join(means) + " |")


def calls_table(path):
    _, rows = load_report(path)
    by_trace, order = by_workload(rows)
    present = {row["allocator"] for row in rows}
    steady = in_order(STEADY, present)
    print("| workload | fragless device calls | " + " | ".join(f"{n} calls/step" for n in steady) + " |")
    print("|---|---:|" + "---:|" * len(steady))
    zero = {name: 0 for name in steady}
    counted = {name: 0 for name in steady}
    totals = {name: 0 for name in steady}

    def number(value):
        return "-" if value is None else f"{int(value):,}"

    for trace in order:
        cells = by_trace[trace]
        first = cells.get("fragless", {}).get("device_calls")
        values = []
        for name in steady:
            value = cells.get(name, {}).get("steady_calls")
            totals[name] += cells.get(name, {}).get("device_calls") or 0
            if value is not None:
                counted[name] += 1
                zero[name] += value == 0
            values.append(number(value))
        print(f"| {trace.replace('|', '/')} | {number(first)} | " + " | ".join(values) + " |")
    print("| **workloads at 0 calls/step** | | " + " | ".join(f"{zero[n]} of {counted[n]}" for n in steady) + " |")
    print("| **device calls in the first replay, all workloads** | | " + " | ".join(number(totals[n]) for n in steady) + " |")


def workload_group(trace):
    """The group of a workload in the goals table: a shared snapshot (.pickle), a shared
    buffer-lifetime CSV (.csv), or a built-in generator (anything else)."""
    if trace.endswith(".pickle"):
        return "shared snapshots"
    if trace.endswith(".csv"):
        return "shared buffer-lifetime CSVs"
    return "built-in workloads"


GROUPS = ["built-in workloads", "shared snapshots", "shared buffer-lifetime CSVs"]


def goal_figures(workloads):
    """Issue 16's goals for fragless over `workloads` (a list of {allocator: row}), as
    fragless-bench corpus computes them per seed: peaks against each peer, the 1.03x bound
    where the packer reaches 1.01x, first-replay calls against expandable segments', steady
    calls where PyTorch makes none, host ns/op and estimated steady time against PyTorch's."""
    g = {"above_pytorch": 0, "compared_pytorch": 0, "above_expandable": 0, "compared_expandable": 0,
         "worst_over_best_peer": 0.0, "packer_tight": 0, "above_103": 0, "worst_tight": 0.0,
         "calls_compared": 0, "calls_above": 0, "fragless_calls": 0, "expandable_calls": 0,
         "pytorch_steady_zero": 0, "steady_calling": 0, "most_steady_calls": 0,
         "ns_logs": [], "steady_compared": 0, "steady_above": 0, "steady_logs": []}

    def ok(cells, name):
        row = cells.get(name)
        return row if row and row.get("status") == "ok" and row.get("peak_reserved_bytes") else None

    for cells in workloads:
        ours = ok(cells, "fragless")
        if ours is None:
            continue
        pytorch, expandable, packer = ok(cells, "pytorch"), ok(cells, "pytorch-expandable"), ok(cells, "ideal-packer")
        peak = ours["peak_reserved_bytes"]
        best_peer = None
        if pytorch:
            g["compared_pytorch"] += 1
            g["above_pytorch"] += peak > pytorch["peak_reserved_bytes"]
            best_peer = pytorch["peak_reserved_bytes"]
            if ours.get("host_ns_per_op") and pytorch.get("host_ns_per_op"):
                g["ns_logs"].append(math.log(ours["host_ns_per_op"] / pytorch["host_ns_per_op"]))
            if pytorch.get("steady_calls") == 0 and ours.get("steady_calls") is not None:
                g["pytorch_steady_zero"] += 1
                if ours["steady_calls"] > 0:
                    g["steady_calling"] += 1
                    g["most_steady_calls"] = max(g["most_steady_calls"], ours["steady_calls"])
            if ours.get("estimated_steady_pass_ns") and pytorch.get("estimated_steady_pass_ns"):
                g["steady_compared"] += 1
                g["steady_above"] += ours["estimated_steady_pass_ns"] > pytorch["estimated_steady_pass_ns"]
                g["steady_logs"].append(math.log(ours["estimated_steady_pass_ns"] / pytorch["estimated_steady_pass_ns"]))
        if expandable:
            g["compared_expandable"] += 1
            g["above_expandable"] += peak > expandable["peak_reserved_bytes"]
            theirs = expandable["peak_reserved_bytes"]
            best_peer = theirs if best_peer is None else min(best_peer, theirs)
            if ours.get("device_calls") is not None and expandable.get("device_calls") is not None:
                g["calls_compared"] += 1
                g["fragless_calls"] += ours["device_calls"]
                g["expandable_calls"] += expandable["device_calls"]
                g["calls_above"] += ours["device_calls"] > expandable["device_calls"]
        if best_peer:
            g["worst_over_best_peer"] = max(g["worst_over_best_peer"], peak / best_peer)
        if packer and packer.get("ratio_to_ideal") is not None and packer["ratio_to_ideal"] <= 1.01 and ours.get("ratio_to_ideal"):
            g["packer_tight"] += 1
            g["above_103"] += ours["ratio_to_ideal"] > 1.03
            g["worst_tight"] = max(g["worst_tight"], ours["ratio_to_ideal"])
    return g


def goals_table(path):
    _, rows = load_report(path)
    by_trace, order = by_workload(rows)
    groups = [(name, [by_trace[t] for t in order if workload_group(t) == name]) for name in GROUPS]
    groups = [(name, cells) for name, cells in groups if cells] + [("all", [by_trace[t] for t in order])]

    def of(part, whole):
        return f"{part} of {whole}"

    def geomean(logs):
        return f"{math.exp(sum(logs) / len(logs)):.2f}" if logs else "-"

    print("| workloads | peak > PyTorch | peak > expandable | worst peak / min(PyTorch, expandable) | > 1.03x ideal where packer <= 1.01x | device calls > expandable (workloads) | calls fragless / expandable (total) | calls in steady pass where PyTorch has 0 (most) | host ns/op / PyTorch (geomean) | est. steady time > PyTorch | est. steady time / PyTorch (geomean) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, cells in groups:
        g = goal_figures(cells)
        tight = of(g["above_103"], g["packer_tight"]) + (f" (worst {g['worst_tight']:.3f})" if g["packer_tight"] else "")
        worst = f"{g['worst_over_best_peer']:.3f}" if g["compared_pytorch"] or g["compared_expandable"] else "-"
        calls_ratio = f"{g['fragless_calls'] / g['expandable_calls']:.2f}" if g["expandable_calls"] else "-"
        steady = of(g["steady_calling"], g["pytorch_steady_zero"]) + (f" ({int(g['most_steady_calls'])})" if g["steady_calling"] else "")
        print(f"| {name} | {of(g['above_pytorch'], g['compared_pytorch'])} | {of(g['above_expandable'], g['compared_expandable'])} | "
              f"{worst} | {tight} | {of(g['calls_above'], g['calls_compared'])} | {calls_ratio} | {steady} | "
              f"{geomean(g['ns_logs'])} | {of(g['steady_above'], g['steady_compared'])} | {geomean(g['steady_logs'])} |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    header, _ = load_report(sys.argv[1])
    for key, value in header.items():
        if value:
            print(f"{key.capitalize()}: {value}  ")
    if header:
        print()
    main(sys.argv[1])
    print()
    calls_table(sys.argv[1])
    print()
    goals_table(sys.argv[1])
