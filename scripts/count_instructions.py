#!/usr/bin/env python3
"""Instructions the allocator executes on corpus workloads, counted by callgrind on simcuda.

Host time on a shared 2-core machine moves by several per cent between runs of the same
build, so a change of a few per cent in the allocator's host paths cannot be seen in
nanoseconds there. An instruction count can: it is the same from run to run (to about
0.001 %), so an A/B of two libraries shows what a change did to the work, seed by seed.
What it cannot show is memory latency -- a cache miss is one instruction -- so a change is
still timed (the corpus A/B in the README's protocol) before it is claimed faster.

Each seed is replayed once per library in `fragless-bench replay-one` under callgrind, with
loop-plan layouts on the allocating thread (loop_plan_threads:false: the same layouts,
every one counted where it runs), automatic compaction off (compact_threshold_bytes:
unlimited: its passes run at most once a second of wall time, so under valgrind on a busy
machine two counts of one library differed by 0.3 % on `huge-tensors` seed 1), symbols
bound at load (LD_BIND_NOW: the dynamic linker resolves a function at its first call, inside
or outside the counted calls depending on which thread calls it first -- up to 5,000
instructions, 0.16 % of that seed) and collection on only inside the peer's allocate and
deallocate calls. Counts are not always the same, though: `moe-routing` seed 1's layouts
take one of two counts (43.41 or 46.84 M in all, run to run, under load or not, in this
release's library and the one before), and once in a clean-clone CI run its count outside
the layouts read 1.4 % above the other library's (10.52 against 10.37 M; 10.37 in more
than twenty runs since) -- work that depends on something outside the trace (not found:
addresses, or timing). With --max-ratio-spread a seed beyond the spread is counted again
once, and judged on the recount. Reported per seed: instructions in those calls (which include simcuda's
emulation of the device calls they make, the same for two libraries that make the same
calls), of which in step layouts (lay_out_narrowest), and the rest -- the allocator's own
paths; and whether peaks and device calls by pass matched between the libraries.

simcuda's device is SIMCUDA_MEMORY=24GiB here (valgrind's address space is too small for
the default 80 GiB window); seeds that do not fit are reported as OOM and left out.

usage: scripts/count_instructions.py [--seeds N] [--families a,b] [--repetitions R]
           [--lib DIR] [--compare DIR] [--jobs J] [--keep DIR]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "build", "default")
BENCH = os.path.join(BUILD, "bench", "fragless-bench")  # --bench
SIMCUDA = os.path.join(BUILD, "simcuda")  # --simcuda


def corpus_families():
    """The generator's families, as its error for an unknown one lists them."""
    text = subprocess.run([BENCH, "generate", "?", "--seed", "1", "-o", os.devnull], capture_output=True, text=True).stderr
    m = re.search(r"known: ([^)]*)\)", text)
    if not m:
        sys.exit("count_instructions: cannot list the corpus families: " + text.strip())
    return [f.strip() for f in m.group(1).split(",") if f.strip()]


def inclusive(annotated, pattern):
    """Largest inclusive count of a function matching `pattern` (callgrind_annotate lists a
    function once per file name it is known by)."""
    best = 0
    for line in annotated.splitlines():
        m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)", line)
        if m and re.search(pattern, m.group(2)):
            best = max(best, int(m.group(1).replace(",", "")))
    return best


def count(trace, lib, index, repetitions, work):
    """(allocator calls' instructions, of which layouts, outcome dict) for one trace."""
    out_file = os.path.join(work, "%s.%d.cg" % (os.path.basename(trace), index))
    env = dict(os.environ, SIMCUDA_MEMORY="24GiB", LD_BIND_NOW="1",
               LD_LIBRARY_PATH=lib + ":" + SIMCUDA + ":" + os.environ.get("LD_LIBRARY_PATH", ""))
    command = ["valgrind", "--tool=callgrind", "--collect-atstart=no",
               "--toggle-collect=*fragless_peer::allocate*", "--toggle-collect=*fragless_peer::deallocate*",
               "--callgrind-out-file=" + out_file, BENCH, "replay-one", "--source", "file:" + trace,
               "--allocator", "fragless[nt]", "--repetitions", str(repetitions), "--max-events", "0",
               "--device-call-ns", "0", "--host-work-ns", "0", "--timeout", "3600",
               "--configuration", "loop_plan_threads:false,compact_threshold_bytes:unlimited"]
    run = subprocess.run(command, capture_output=True, text=True, env=env)
    outcome = dict(line.split("\t", 1) for line in run.stdout.splitlines() if "\t" in line)
    if not os.path.exists(out_file):
        return None, None, outcome
    annotated = subprocess.run(["callgrind_annotate", "--auto=no", "--inclusive=yes", "--threshold=100", out_file],
                               capture_output=True, text=True).stdout
    os.remove(out_file)
    calls = inclusive(annotated, r"fragless_peer::allocate\(") + inclusive(annotated, r"fragless_peer::deallocate\(")
    layouts = inclusive(annotated, r"fragless::core::lay_out_narrowest\(")
    return calls, layouts, outcome


def main():
    global BENCH, SIMCUDA
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=3, help="seeds 1..N of every family (default 3)")
    parser.add_argument("--families", default="", help="comma list (default: every corpus family)")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--lib", default=os.path.join(BUILD, "allocator"), help="directory of libfragless.so")
    parser.add_argument("--compare", default="",
                        help="a second libfragless directory: prints both, and --lib's count over this one's")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--keep", default="", help="keep the generated traces here")
    parser.add_argument("--bench", default=BENCH, help="the fragless-bench to run (default: the default build's)")
    parser.add_argument("--simcuda", default=SIMCUDA, help="directory of simcuda's libcuda.so.1")
    parser.add_argument("--max-ratio-spread", type=float, default=0,
                        help="with --compare: exit 1 unless every seed's ratio is within this of 1 and its "
                             "peaks and calls match (a check that two libraries do the same work)")
    args = parser.parse_args()
    BENCH, SIMCUDA = os.path.abspath(args.bench), os.path.abspath(args.simcuda)
    if shutil.which("valgrind") is None or shutil.which("callgrind_annotate") is None:
        sys.exit("count_instructions: needs valgrind (scripts/setup.sh installs it)")
    if not os.path.exists(BENCH):
        sys.exit("count_instructions: build first (cmake --preset default && cmake --build --preset default)")
    work = args.keep or tempfile.mkdtemp(prefix="fragless-instructions-")
    os.makedirs(work, exist_ok=True)
    chosen = [f for f in args.families.split(",") if f] or corpus_families()
    traces = []
    for family in chosen:
        for seed in range(1, args.seeds + 1):
            path = os.path.join(work, "%s-%d.trace" % (family, seed))
            generated = subprocess.run([BENCH, "generate", family, "--seed", str(seed), "-o", path],
                                       capture_output=True, text=True)
            if generated.returncode != 0:
                sys.exit("count_instructions: " + (generated.stderr.strip() or "cannot generate " + family))
            traces.append(path)
    libraries = [args.lib] + ([args.compare] if args.compare else [])
    jobs = [(trace, index) for trace in traces for index in range(len(libraries))]
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(lambda job: count(job[0], libraries[job[1]], job[1], args.repetitions, work), jobs))
    by_job = dict(zip(jobs, results))
    totals = [[0, 0] for _ in libraries]
    names = ["--lib"] + (["--compare"] if args.compare else [])
    print("%-28s" % "" + "".join("  %25s" % ("instructions, " + name) for name in names))
    header = "%-28s" % "seed" + "".join("  %12s %12s" % ("all (M)", "no layouts") for _ in libraries)
    if args.compare:
        header += "  ratio  same peaks+calls"
    print(header)
    left_out = 0
    failed = []
    for trace in traces:
        rows = [by_job[(trace, index)] for index in range(len(libraries))]
        fits = all(calls is not None and outcome.get("status") == "ok" and outcome.get("ooms", "0") == "0"
                   for calls, _, outcome in rows)
        label = os.path.basename(trace)[:-len(".trace")]
        if not fits:
            left_out += 1
            print("%-28s  left out: %s" % (label, "; ".join(o.get("status", "failed") + (" (OOM)" if o.get("ooms", "0") != "0" else "")
                                                            for _, _, o in rows)))
            continue
        line = "%-28s" % label
        for index, (calls, layouts, _) in enumerate(rows):
            totals[index][0] += calls
            totals[index][1] += calls - layouts
            line += "  %12.2f %12.2f" % (calls / 1e6, (calls - layouts) / 1e6)
        if args.compare:
            a, b = rows[0][0] - rows[0][1], rows[1][0] - rows[1][1]
            same = all(rows[0][2].get(key) == rows[1][2].get(key) for key in ("peak_reserved_bytes", "calls_by_pass"))
            line += "  %5.3f  %s" % (a / b if b else 0, "yes" if same else "NO")
            beyond = lambda a, b, same: not same or b == 0 or abs(a / b - 1) > args.max_ratio_spread
            if args.max_ratio_spread and beyond(a, b, same):
                # Rare runs read differently (module docstring): counted again once, judged there.
                again = [count(trace, libraries[index], index, args.repetitions, work) for index in range(2)]
                if any(calls is None for calls, _, _ in again):
                    failed.append(label)
                else:
                    a2, b2 = again[0][0] - again[0][1], again[1][0] - again[1][1]
                    same2 = all(again[0][2].get(key) == again[1][2].get(key) for key in ("peak_reserved_bytes", "calls_by_pass"))
                    line += "  (counted again: %.2f / %.2f M, %5.3f)" % (a2 / 1e6, b2 / 1e6, a2 / b2 if b2 else 0)
                    if beyond(a2, b2, same2):
                        failed.append(label)
        print(line)
    line = "%-28s" % "total"
    for all_calls, no_layouts in totals:
        line += "  %12.2f %12.2f" % (all_calls / 1e6, no_layouts / 1e6)
    if args.compare and totals[1][1]:
        line += "  %5.3f" % (totals[0][1] / totals[1][1])
    print(line)
    if left_out:
        print("(%d seeds left out: they do not fit simcuda's 24 GiB under valgrind)" % left_out)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    if args.max_ratio_spread and (failed or left_out == len(traces)):
        sys.exit("count_instructions: %s beyond %g of the compared library" %
                 (", ".join(failed) or "no seed", args.max_ratio_spread))


if __name__ == "__main__":
    main()
