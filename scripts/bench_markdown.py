#!/usr/bin/env python3
"""Turns fragless-bench's results.json into the README's compact Markdown tables.

One row per workload: the ideal (peak live bytes, 512 B-rounded, rounded up to 2 MiB) and
each allocator's peak reserved bytes (over every repetition) as a multiple of it; the best replayed allocator of a
row in bold; geometric means at the bottom (over the workloads where every replayed
allocator ran ok, like fragless-bench's own summary rows), once over all workloads and once
over those whose ideal is at least 64 MiB (a 2 MiB page is a large share of a smaller one).
A second table gives the device calls: fragless's in the first replay, and every caching
allocator's steady-state calls per step (the last of the warm repetitions). Above the tables,
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
