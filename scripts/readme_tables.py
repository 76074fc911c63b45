#!/usr/bin/env python3
"""The README's benchmark tables, kept equal to the runs that produced them.

A benchmark run's markdown (`fragless-bench corpus --markdown`, or `scripts/bench_markdown.py`
on `fragless-bench main`'s results.json) is committed under docs/runs/, its command line in
it. Each of its tables has a header row that names it; the README holds the same table under
the same header row, once.

    python3 scripts/readme_tables.py splice docs/runs/corpus.md [README.md]
        replaces each README table whose header row is one of the run's by the run's table
    python3 scripts/readme_tables.py check docs/runs/corpus.md [README.md]
        fails (exit 1) unless every table of the run is in the README, row for row

Invariant kept (checked by ctest's `bench_readme_tables`): what the README shows as a run's
table is that run's output, not a copy edited by hand.
"""
import sys


def tables(lines):
    """[(start, end)] of each markdown table: runs of lines starting with '|'."""
    found, start = [], None
    for index, line in enumerate(lines + [""]):
        if line.startswith("|"):
            if start is None:
                start = index
        elif start is not None:
            found.append((start, index))
            start = None
    return found


def run_tables(run_lines):
    return [run_lines[start:end] for start, end in tables(run_lines)]


def readme_table_for(header, readme_lines):
    """(start, end) of the README's one table under `header`; an error when not exactly one."""
    matches = [(start, end) for start, end in tables(readme_lines) if readme_lines[start] == header]
    if len(matches) != 1:
        raise SystemExit(f"readme_tables: {len(matches)} README tables have the header row {header[:90]}...")
    return matches[0]


def main(argv):
    if len(argv) not in (3, 4) or argv[1] not in ("splice", "check"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    mode, run_path = argv[1], argv[2]
    readme_path = argv[3] if len(argv) == 4 else "README.md"
    with open(run_path) as f:
        run_lines = f.read().split("\n")
    with open(readme_path) as f:
        readme_lines = f.read().split("\n")
    new_tables = run_tables(run_lines)
    if not new_tables:
        raise SystemExit(f"readme_tables: no table in {run_path}")
    if mode == "check":
        stale = []
        for table in new_tables:
            start, end = readme_table_for(table[0], readme_lines)
            if readme_lines[start:end] != table:
                stale.append(table[0])
        for header in stale:
            print(f"readme_tables: the README's table differs from {run_path}'s: {header[:90]}...", file=sys.stderr)
        if not stale:
            print(f"readme_tables: {len(new_tables)} tables of {run_path} are in {readme_path} as run")
        return 1 if stale else 0
    # Splice from the last table up, so earlier positions stay valid.
    places = sorted(((readme_table_for(table[0], readme_lines), table) for table in new_tables), reverse=True)
    for (start, end), table in places:
        readme_lines[start:end] = table
    with open(readme_path, "w") as f:
        f.write("\n".join(readme_lines))
    print(f"readme_tables: {len(new_tables)} tables of {run_path} spliced into {readme_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
