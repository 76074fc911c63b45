#!/usr/bin/env python3
"""Plot a corpus run's goals against program size, as an SVG a person can read at a glance.

Reads the rows of `fragless-bench corpus --csv ROWS.csv` and draws two panels over the
seed's ideal (the most bytes live at once, log scale), in bins of half an octave:
  - device calls of the first pass over expandable segments' on the same seed: fragless's
    median with the band from its 10th to 90th percentile, PyTorch's median, and the line
    where the calls goal holds (1);
  - peak reserved over the ideal, as the excess in per cent (log scale; a peak at the ideal
    is drawn at 0.01 %): each peer's median, fragless's band from its 10th to 90th
    percentile, and the 3 % of the memory goal.
A bin with fewer than --min-seeds seeds is left out. The totals of the report's tables are
dominated by the largest seeds; this shows each size for itself (Note [Goals by program
size] in bench/report/corpus_report.cpp has the same cut as a table).

usage: scripts/corpus_plot.py ROWS.csv -o PLOT.svg [--min-seeds N] [--title TEXT]
"""
import argparse
import csv
import math
import os
import sys
from collections import defaultdict
from xml.sax.saxutils import escape

MIB = 1024.0 * 1024.0
COLOURS = {"fragless": "#1f77b4", "pytorch": "#d62728", "pytorch-expandable": "#2ca02c", "ideal-packer": "#7f7f7f"}
LABELS = {"fragless": "fragless", "pytorch": "PyTorch", "pytorch-expandable": "PyTorch, expandable segments",
          "ideal-packer": "idealized packer"}


def load(path):
    """{trace: {allocator: row}} for the ok rows with a peak and an ideal."""
    seeds = defaultdict(dict)
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row.get("status") != "ok" or not row.get("ideal_bytes") or not row.get("peak_reserved_bytes"):
                continue
            seeds[row["trace"]][row["allocator"]] = row
    return seeds


def percentile(values, fraction):
    """Nearest rank, as the corpus report's tables."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))]


def binned(seeds, value_of, min_seeds):
    """[(bin centre in bytes, [values])] over half-octave bins of the ideal, in order."""
    bins = defaultdict(list)
    for rows in seeds.values():
        value = value_of(rows)
        if value is None or not value > 0:
            continue
        ideal = float(next(iter(rows.values()))["ideal_bytes"])
        bins[math.floor(2 * math.log2(ideal))].append(value)
    return [(2 ** ((key + 0.5) / 2), values) for key, values in sorted(bins.items()) if len(values) >= min_seeds]


def calls_over_expandable(allocator):
    def value(rows):
        ours, theirs = rows.get(allocator), rows.get("pytorch-expandable")
        if ours is None or theirs is None or not ours.get("device_calls") or not theirs.get("device_calls"):
            return None
        expandable = float(theirs["device_calls"])
        return float(ours["device_calls"]) / expandable if expandable > 0 else None
    return value


def peak_over_ideal(allocator):
    def value(rows):
        row = rows.get(allocator)
        return float(row["ratio_to_ideal"]) if row is not None and row.get("ratio_to_ideal") else None
    return value


class panel:
    """One plot area: log x (bytes), log y (a ratio); draws into a list of SVG strings."""

    def __init__(self, svg, x, y, width, height, x_range, y_range, title, y_label, tick_label):
        self.svg, self.x, self.y, self.width, self.height = svg, x, y, width, height
        self.x_lo, self.x_hi = (math.log(v) for v in x_range)
        self.y_lo, self.y_hi = (math.log(v) for v in y_range)
        svg.append(f'<text x="{x + width / 2:.1f}" y="{y - 12:.1f}" text-anchor="middle" font-size="14">{escape(title)}</text>')
        svg.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{height:.1f}" fill="none" stroke="#444"/>')
        svg.append(f'<text transform="translate({x - 52:.1f},{y + height / 2:.1f}) rotate(-90)" text-anchor="middle">'
                   f'{escape(y_label)}</text>')
        svg.append(f'<text x="{x + width / 2:.1f}" y="{y + height + 36:.1f}" text-anchor="middle">'
                   'program size: the most bytes live at once</text>')
        size = 2 ** math.ceil(math.log2(x_range[0]))
        while size <= x_range[1]:
            px = self.px(size)
            label = f"{size / 1024 / MIB:g} GiB" if size >= 1024 * MIB else f"{size / MIB:g} MiB"
            svg.append(f'<line x1="{px:.1f}" y1="{y:.1f}" x2="{px:.1f}" y2="{y + height:.1f}" stroke="#eee"/>')
            svg.append(f'<text x="{px:.1f}" y="{y + height + 16:.1f}" text-anchor="middle" font-size="11">{label}</text>')
            size *= 4
        for tick in self.y_ticks(y_range):
            py = self.py(tick)
            svg.append(f'<line x1="{x:.1f}" y1="{py:.1f}" x2="{x + width:.1f}" y2="{py:.1f}" stroke="#eee"/>')
            svg.append(f'<text x="{x - 6:.1f}" y="{py + 4:.1f}" text-anchor="end" font-size="11">{tick_label(tick)}</text>')

    @staticmethod
    def y_ticks(y_range):
        """1, 2 and 5 times the powers of ten within the range; the powers alone past three decades."""
        lo, hi = y_range
        multiples = (1,) if hi / lo > 1000 else (1, 2, 5)
        return [m * 10.0 ** e for e in range(-6, 7) for m in multiples if lo <= m * 10.0 ** e <= hi]

    def px(self, value):
        return self.x + self.width * (math.log(value) - self.x_lo) / (self.x_hi - self.x_lo)

    def py(self, value):
        clamped = min(max(math.log(value), self.y_lo), self.y_hi)
        return self.y + self.height - self.height * (clamped - self.y_lo) / (self.y_hi - self.y_lo)

    def line(self, points, colour, dash=None, width=2.0):
        if not points:
            return
        path = " ".join(f"{self.px(x):.1f},{self.py(y):.1f}" for x, y in points)
        dashed = f' stroke-dasharray="{dash}"' if dash else ""
        self.svg.append(f'<polyline fill="none" stroke="{colour}" stroke-width="{width}"{dashed} points="{path}"/>')

    def band(self, lower, upper, colour):
        if not lower:
            return
        path = " ".join(f"{self.px(x):.1f},{self.py(y):.1f}" for x, y in lower + list(reversed(upper)))
        self.svg.append(f'<polygon fill="{colour}" fill-opacity="0.18" stroke="none" points="{path}"/>')

    def level(self, value, label):
        py = self.py(value)
        self.svg.append(f'<line x1="{self.x:.1f}" y1="{py:.1f}" x2="{self.x + self.width:.1f}" y2="{py:.1f}" '
                        'stroke="black" stroke-dasharray="4,3"/>')
        self.svg.append(f'<text x="{self.x + self.width - 4:.1f}" y="{py - 4:.1f}" text-anchor="end" font-size="11">'
                        f'{escape(label)}</text>')


def plot(seeds, min_seeds, title):
    ideals = [float(next(iter(rows.values()))["ideal_bytes"]) for rows in seeds.values()]
    if not ideals:
        raise SystemExit("corpus_plot: no ok rows with a peak and an ideal")
    x_range = (2 ** math.floor(math.log2(min(ideals))), 2 ** math.ceil(math.log2(max(ideals)) + 0.01))
    calls = binned(seeds, calls_over_expandable("fragless"), min_seeds)
    pytorch_calls = binned(seeds, calls_over_expandable("pytorch"), min_seeds)
    peaks = {a: binned(seeds, peak_over_ideal(a), min_seeds) for a in COLOURS}
    if not calls and not any(peaks.values()):
        raise SystemExit(f"corpus_plot: no bin holds {min_seeds} seeds (--min-seeds)")

    def span(series_list, floor, ceiling):
        values = [v for series in series_list for _, vs in series for v in vs]
        lo = max(floor, min(values + [1.0]) * 0.9)
        hi = min(ceiling, max(values + [1.0]) * 1.1)
        return lo, max(hi, lo * 1.05)

    width, height = 1240, 520
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="{width / 2}" y="26" text-anchor="middle" font-size="18">{escape(title)}</text>']
    # Legend.
    legend_x = 80
    for allocator in COLOURS:
        svg.append(f'<line x1="{legend_x}" y1="52" x2="{legend_x + 24}" y2="52" stroke="{COLOURS[allocator]}" stroke-width="2"/>')
        svg.append(f'<text x="{legend_x + 30}" y="56">{escape(LABELS[allocator])} (median)</text>')
        legend_x += 60 + 7.2 * len(LABELS[allocator]) + 60
    svg.append(f'<rect x="{legend_x}" y="46" width="24" height="12" fill="{COLOURS["fragless"]}" fill-opacity="0.18"/>')
    svg.append(f'<text x="{legend_x + 30}" y="56">fragless, 10th to 90th percentile</text>')

    left = panel(svg, 90, 110, 480, 330, x_range, span([calls, pytorch_calls], 0.01, 1000),
                 "device calls of the first pass / expandable segments'", "ratio (log)", lambda t: f"{t:g}x")
    left.band([(x, percentile(v, 0.1)) for x, v in calls], [(x, percentile(v, 0.9)) for x, v in calls], COLOURS["fragless"])
    left.level(1.0, "the calls goal: at most expandable segments'")
    left.line([(x, percentile(v, 0.5)) for x, v in pytorch_calls], COLOURS["pytorch"])
    left.line([(x, percentile(v, 0.5)) for x, v in calls], COLOURS["fragless"])

    # Peaks as the excess over the ideal, in per cent on a log scale: the goals and the
    # differences between peers lie between 0.1 % and a few per cent.
    floor_percent = 0.01
    excess = {a: [(x, [max(floor_percent, (v - 1) * 100) for v in vs]) for x, vs in series] for a, series in peaks.items()}
    right = panel(svg, 720, 110, 480, 330, x_range, span(list(excess.values()), floor_percent, 1000),
                  "peak reserved over the ideal", "excess over the ideal (log)", lambda t: f"{t:g} %")
    fragless_excess = excess["fragless"]
    right.band([(x, percentile(v, 0.1)) for x, v in fragless_excess], [(x, percentile(v, 0.9)) for x, v in fragless_excess],
               COLOURS["fragless"])
    right.level(3.0, "3 %: the goal where the packer reaches 1 %")
    for allocator in ("ideal-packer", "pytorch", "pytorch-expandable", "fragless"):
        right.line([(x, percentile(v, 0.5)) for x, v in excess[allocator]], COLOURS[allocator],
                   dash="3,2" if allocator == "ideal-packer" else None)
    counted = sum(len(v) for _, v in calls)
    svg.append(f'<text x="{width / 2}" y="{height - 14}" text-anchor="middle" font-size="11">{counted} seeds with '
               f'fragless and expandable segments rows; bins of half an octave with at least {min_seeds} seeds</text>')
    svg.append("</svg>")
    return "\n".join(svg) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("rows", help="fragless-bench corpus --csv output")
    parser.add_argument("-o", "--output", required=True, help="SVG file to write")
    parser.add_argument("--min-seeds", type=int, default=10, help="leave out bins with fewer seeds (default 10)")
    parser.add_argument("--title", default="The generated corpus by program size")
    args = parser.parse_args()
    svg = plot(load(args.rows), max(1, args.min_seeds), args.title)
    with open(args.output + ".tmp", "w") as f:
        f.write(svg)
    os.replace(args.output + ".tmp", args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
