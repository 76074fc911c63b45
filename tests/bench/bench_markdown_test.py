#!/usr/bin/env python3
"""scripts/bench_markdown.py's goals table on a hand-made results.json
(tests/bench/bench_markdown_sample.json), every figure worked out by hand:

- builtin-a: fragless peaks at 110 against PyTorch's 120 and expandable segments' 100 (above
  the latter: 110/100 = 1.100 over the better peer), 1.10x the ideal where the packer reaches
  1.005x (above 1.03x), 10 first-replay calls against expandable segments' 5, no steady call,
  twice PyTorch's host ns/op and half its estimated steady time.
- dir/x.pickle: equal to PyTorch's peak (not above), below expandable segments', the packer at
  1.02x (not tight), 4 calls against 8, 3 steady calls where PyTorch makes none, PyTorch's
  host ns/op, twice its steady time. Its fragless[pages] row must not count.
- dir/broken.csv: fragless not ok, left out of every goal.

Invariant checked: the goals of the shared-trace run are computed per workload as the corpus
report computes them per seed, grouped by kind of workload, with an `all` row.

    python3 tests/bench/bench_markdown_test.py scripts/bench_markdown.py tests/bench/bench_markdown_sample.json
"""
import subprocess
import sys

EXPECTED = {
    "built-in workloads": "| built-in workloads | 0 of 1 | 1 of 1 | 1.100 | 1 of 1 (worst 1.100) | 1 of 1 | 2.00 | 0 of 1 | 2.00 | 0 of 1 | 0.50 |",
    "shared snapshots": "| shared snapshots | 0 of 1 | 0 of 1 | 1.000 | 0 of 0 | 0 of 1 | 0.50 | 1 of 1 (3) | 1.00 | 1 of 1 | 2.00 |",
    "shared buffer-lifetime CSVs": "| shared buffer-lifetime CSVs | 0 of 0 | 0 of 0 | - | 0 of 0 | 0 of 0 | - | 0 of 0 | - | 0 of 0 | - |",
    "all": "| all | 0 of 2 | 1 of 2 | 1.100 | 1 of 1 (worst 1.100) | 1 of 2 | 1.08 | 1 of 2 (3) | 1.41 | 1 of 2 | 1.00 |",
}


def main(script, sample):
    output = subprocess.run([sys.executable, script, sample], check=True, capture_output=True, text=True).stdout
    lines = output.splitlines()
    header = next((i for i, line in enumerate(lines) if line.startswith("| workloads | peak > PyTorch |")), None)
    if header is None:
        sys.exit("no goals table in the output:\n" + output)
    rows = {}
    for line in lines[header + 2:]:
        if not line.startswith("| "):
            break
        rows[line.split(" | ")[0][2:]] = line
    failures = [f"{name}:\n  expected {want}\n  got      {rows.get(name)}" for name, want in EXPECTED.items() if rows.get(name) != want]
    if set(rows) != set(EXPECTED):
        failures.append(f"groups {sorted(rows)}, expected {sorted(EXPECTED)}")
    if failures:
        sys.exit("\n".join(failures))
    print("goals table: every figure as worked out by hand")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
