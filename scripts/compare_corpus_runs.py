#!/usr/bin/env python3
"""Compare fragless between two sets of corpus runs (the host-time A/B of the README).

Each side is one or more `fragless-bench corpus --csv` files of the same seeds (say, three
runs of each library, alternated: `LD_LIBRARY_PATH=DIR:build/default/simcuda
build/default/bench/fragless-bench corpus --seeds 200 --repetitions 5 --jobs 2 --allocators
fragless --csv A1.csv --no-table`). It reports:
  - on how many seeds every run of both sides has the same peak and the same device calls
    by pass (a host-path change must leave them alone; a policy change shows here);
  - per family and overall, B over A as the geometric mean of the per-seed ratios of each
    side's geometric mean over its runs: host ns per operation of each pass, of the median
    repetition, of the estimated steady pass, and the longest single call.
Host time on a shared machine moves by several per cent between runs of the same build;
alternate the two sides and use several runs of each.

usage: scripts/compare_corpus_runs.py A1.csv[,A2.csv...] B1.csv[,B2.csv...]
           [--allocator NAME] [--require-same]
--require-same exits 1 unless every seed's peaks and calls agree (for a change that must not
move any block).
"""
import argparse
import csv
import math
import sys
from collections import defaultdict


def load(path, allocator):
    rows = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row["allocator"] == allocator and row["host_ns_by_pass"] and row["status"] == "ok":
                rows[row["trace"]] = row
    return rows


def geomean(values):
    values = [v for v in values if v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("a", help="comma list of corpus CSVs (the baseline)")
    parser.add_argument("b", help="comma list of corpus CSVs (the change)")
    parser.add_argument("--allocator", default="fragless")
    parser.add_argument("--require-same", action="store_true")
    args = parser.parse_args()
    sides = [[load(p, args.allocator) for p in side.split(",") if p] for side in (args.a, args.b)]
    if not sides[0] or not sides[1]:
        sys.exit("compare_corpus_runs: each side needs at least one CSV")
    seeds = set(sides[0][0])
    for run in sides[0] + sides[1]:
        seeds &= set(run)
    if not seeds:
        sys.exit("compare_corpus_runs: no seed is in every run (same --seeds and families?)")
    first = sides[0][0]
    same = [s for s in seeds if all(run[s]["peak_reserved_bytes"] == first[s]["peak_reserved_bytes"] and
                                    run[s]["calls_by_pass"] == first[s]["calls_by_pass"]
                                    for run in sides[0] + sides[1])]
    print("seeds in every run: %d; same peak and calls by pass in every run: %d" % (len(seeds), len(same)))

    def side_value(runs, seed, field, index=None):
        values = []
        for run in runs:
            text = run[seed][field]
            value = float(text.split()[index]) if index is not None else float(text) if text else 0.0
            values.append(value)
        return geomean(values)

    passes = min(len(first[s]["host_ns_by_pass"].split()) for s in seeds)
    metrics = [("pass %d" % (i + 1), "host_ns_by_pass", i) for i in range(passes)]
    metrics += [("median", "host_ns_per_op", None), ("steady est.", "estimated_steady_pass_ns", None),
                ("longest", "longest_op_ns", None)]
    ratios = defaultdict(lambda: defaultdict(list))
    for seed in seeds:
        family = seed.split(":")[1] if seed.count(":") >= 2 else seed
        for name, field, index in metrics:
            a = side_value(sides[0], seed, field, index)
            b = side_value(sides[1], seed, field, index)
            if a > 0 and b > 0:
                ratios[family][name].append(b / a)
                ratios["all"][name].append(b / a)
    names = [m[0] for m in metrics]
    print("B / A, geometric mean of per-seed ratios:")
    print("%-24s" % "family" + "".join("%12s" % n for n in names))
    for family in sorted(ratios, key=lambda f: (f == "all", f)):
        print("%-24s" % family + "".join("%12.3f" % geomean(ratios[family][n]) for n in names))
    if args.require_same and len(same) != len(seeds):
        sys.exit("compare_corpus_runs: %d seeds differ in peaks or calls" % (len(seeds) - len(same)))


if __name__ == "__main__":
    main()
