#!/usr/bin/env python3
"""Where the allocator's host time goes in a replay -- split into what ns/op counts and what it
does not -- from a call-graph profile.

A replay times every allocator call, but its host ns/op counts only the trace's own events: the
frees it makes at each pass's end, where a loop plan over a whole pass is found and laid out,
count in the longest call alone (Note [Frees at a pass's end] in bench/replay/replayer.cpp).
A profile that mixes the two mostly shows those layouts. This script keeps them apart: it
builds the library, the benchmark and simcuda with frame pointers (so that every frame, the
benchmark's `free_at_pass_end` among them, is on the recorded stacks), runs `perf record
--call-graph fp` over the given fragless-bench command on simcuda, and reports, for the
samples taken inside the allocator's calls on the replaying thread, the shares under
`free_at_pass_end` and inside simcuda (whose emulation of device calls ns/op leaves out),
and the functions with the largest inclusive share of what ns/op counts and of those frees.

usage: scripts/host_profile.py [--build DIR] [--top N] [--frequency HZ] -- BENCH_ARGS...
       scripts/host_profile.py --perf-script FILE [--top N]

  BENCH_ARGS     a fragless-bench command, e.g.
                 corpus --families many-streams --seeds 30 --repetitions 5 --jobs 1
                 --allocators fragless --no-table --csv rows.csv
                 (--jobs 1 keeps one replay at a time; each replay is its own process,
                 all of them recorded)
  --build DIR    the frame-pointer build (default build/profile; configured and built here)
  --perf-script  read a `perf script -F pid,tid,ip,sym,dso` text instead of recording one

Needs `perf` (Debian: linux-perf) and permission to record (kernel.perf_event_paranoid <= 2
for one's own processes).
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENTRIES = ("fragless::bench::(anonymous namespace)::fragless_peer::allocate",
           "fragless::bench::(anonymous namespace)::fragless_peer::deallocate")
PASS_END = "free_at_pass_end"
HEADER = re.compile(r"\s*(\d+)/(\d+)\s*$")
FRAME = re.compile(r"\s*[0-9a-f]+ (.*) \((.*)\)\s*$")
SIMCUDA = re.compile(r"(^|/)(libcuda\.so|libcudart\.so|libnvidia-ml\.so)")  # simcuda's stand-ins


def samples(lines):
    """(pid, tid, [(function, object file), innermost first]) for each sample of a perf
    script text."""
    current = None
    frames = []
    for line in lines:
        header = HEADER.match(line)
        if header:
            if current is not None:
                yield current[0], current[1], frames
            current, frames = (header.group(1), header.group(2)), []
            continue
        frame = FRAME.match(line)
        if frame and current is not None:
            frames.append((frame.group(1), frame.group(2)))
    if current is not None:
        yield current[0], current[1], frames


PARTS = ("ns/op", "emulation", "pass end")


def split_profile(lines):
    """Counts of the samples inside the allocator's calls on a replaying thread -- inside
    ns/op, in simcuda's emulation of a device call (taken out of ns/op: Note [Host time
    without emulation] in bench/replay/device_counters.hpp), at a pass's end -- and each
    part's inclusive counts by function."""
    counts = {part: 0 for part in PARTS}
    inclusive = {part: collections.Counter() for part in PARTS}
    for pid, tid, frames in samples(lines):
        names = [name for name, _ in frames]
        # The replaying thread is the process's first: a layout thread's samples are not
        # inside a timed call.
        if pid != tid or not any(name.startswith(ENTRIES) for name in names):
            continue
        if any(PASS_END in name for name in names):
            part = "pass end"
        elif any(SIMCUDA.search(object_file) for _, object_file in frames):
            part = "emulation"
        else:
            part = "ns/op"
        counts[part] += 1
        for name in set(names):
            inclusive[part][name] += 1
    return counts, inclusive


def short(name, width=100):
    return name if len(name) <= width else name[:width - 3] + "..."


def report(lines, top):
    counts, inclusive = split_profile(lines)
    total = sum(counts.values())
    if total == 0:
        print("no samples inside the allocator's calls (was the benchmark built with frame pointers?)")
        return 1
    print(f"samples inside the allocator's calls: {total}; not in ns/op: simcuda's emulation "
          f"{counts['emulation']} ({100.0 * counts['emulation'] / total:.1f} %), the frees at a pass's end "
          f"{counts['pass end']} ({100.0 * counts['pass end'] / total:.1f} %)")
    for part, title in (("ns/op", "what ns/op counts"), ("pass end", "the frees at a pass's end")):
        if counts[part] == 0:
            continue
        print(f"\n{title}: {counts[part]} samples, inclusive share by function")
        for name, count in sorted(inclusive[part].items(), key=lambda item: (-item[1], item[0]))[:top]:
            print(f"{100.0 * count / counts[part]:6.1f} %  {short(name)}")
    return 0


def run(command, **kwargs):
    print("+ " + " ".join(command), file=sys.stderr)
    return subprocess.run(command, check=True, **kwargs)


def record(build, frequency, bench_args):
    if shutil.which("perf") is None:
        sys.exit("host_profile: perf is not installed (Debian: apt-get install linux-perf)")
    run(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
         "-DCMAKE_CXX_FLAGS=-fno-omit-frame-pointer"], stdout=subprocess.DEVNULL)
    run(["cmake", "--build", build, "--target", "fragless", "fragless-bench", "simcuda_runtime", "simcuda_driver", "simcuda_nvml",
         "-j", str(os.cpu_count() or 2)], stdout=subprocess.DEVNULL)
    data = os.path.join(build, "host_profile.perf.data")
    bench = os.path.join(build, "bench", "fragless-bench")
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(build, "allocator") + ":" + os.environ.get("LD_LIBRARY_PATH", ""))
    run([os.path.join(ROOT, "scripts", "with-simcuda"), "--build", build, "perf", "record", "-q", "-F", str(frequency),
         "--call-graph", "fp", "-o", data, bench] + bench_args, env=env, stdout=subprocess.DEVNULL)
    script = subprocess.run(["perf", "script", "-i", data, "-F", "pid,tid,ip,sym,dso"], check=True,
                            capture_output=True, text=True)
    return script.stdout.splitlines()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build", "profile"))
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--frequency", type=int, default=10000)
    parser.add_argument("--perf-script", help="a perf script text to read instead of recording")
    parser.add_argument("bench_args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    bench_args = args.bench_args[1:] if args.bench_args[:1] == ["--"] else args.bench_args
    if args.perf_script:
        with open(args.perf_script) as text:
            return report(text.read().splitlines(), args.top)
    if not bench_args:
        parser.error("a fragless-bench command to profile is needed after --")
    return report(record(args.build, args.frequency, bench_args), args.top)


if __name__ == "__main__":
    sys.exit(main())
