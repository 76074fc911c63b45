"""The differential harness: runs every scenario (scenarios/*_scenario.py) twice on simcuda,
once with PyTorch's native CUDA allocator and once with fragless installed (observe.py, one
process each), and compares what a PyTorch user can observe, observation by observation.

    python run_differential.py [SCENARIO_NAME ...]   # exit 0: everything agrees or is allowed

Invariant: a difference passes only when allowlist.txt names it (scenario and observation)
with a reason; an allow-list entry that no longer matches a difference fails the run too,
so the list stays true. A scenario that crashes on either side fails the run. A scenario
that uses an API the installed torch release lacks (both sides report the same missing
torch attribute) is reported as skipped, with the reason, and its allow-list entries are
not held against the list; it never counts as agreeing.
"""
import concurrent.futures
import fnmatch
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIOS = os.path.join(HERE, "scenarios")
TIMEOUT_S = 240


def load_allowlist(path):
    """allowlist.txt lines: `scenario:observation-glob  reason` (reason required)."""
    entries = []
    with open(path, encoding="utf-8") as stream:
        for number, line in enumerate(stream, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, _, reason = line.partition(" ")
            scenario, _, pattern = key.partition(":")
            if not scenario or not pattern or not reason.strip():
                raise SystemExit(f"allowlist.txt:{number}: want 'scenario:observation reason', got {line!r}")
            entries.append({"scenario": scenario, "pattern": pattern, "reason": reason.strip(), "used": False})
    return entries


def observe(allocator, scenario_path):
    result = subprocess.run([sys.executable, os.path.join(HERE, "observe.py"), allocator, scenario_path],
                            capture_output=True, text=True, timeout=TIMEOUT_S, env=os.environ.copy())
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode != 0 or not lines:
        return {"observations": {}, "crash": f"exit {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"}
    return json.loads(lines[-1])


def compare(name, native, fragless, allowlist):
    """Differences as (observation, native value, fragless value, allowed reason or None)."""
    differences = []
    for key in sorted(set(native["observations"]) | set(fragless["observations"])):
        theirs = native["observations"].get(key, "<not recorded>")
        ours = fragless["observations"].get(key, "<not recorded>")
        if theirs == ours:
            continue
        reason = None
        for entry in allowlist:
            if entry["scenario"] == name and fnmatch.fnmatchcase(key, entry["pattern"]):
                entry["used"] = True
                reason = entry["reason"]
                break
        differences.append((key, theirs, ours, reason))
    return differences


def main(argv):
    allowlist = load_allowlist(os.path.join(HERE, "allowlist.txt"))
    names = sorted(f[: -len(".py")] for f in os.listdir(SCENARIOS) if f.endswith("_scenario.py"))
    if argv:
        names = [n for n in names if n in argv or n.replace("_scenario", "") in argv]
    jobs = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for name in names:
            path = os.path.join(SCENARIOS, name + ".py")
            jobs[name] = (pool.submit(observe, "native", path), pool.submit(observe, "fragless", path))
    failures = 0
    skipped = []
    for name in names:
        native, fragless = (job.result() for job in jobs[name])
        if "skipped" in native and native.get("skipped") == fragless.get("skipped"):
            skipped.append(name)
            print(f"skipped {name}: {native['skipped']}")
            continue
        for side, result in (("native", native), ("fragless", fragless)):
            if "skipped" in result:
                result["crash"] = f"only this side lacks an API: {result['skipped']}"
        for side, result in (("native", native), ("fragless", fragless)):
            if "crash" in result:
                failures += 1
                print(f"FAIL {name}: crashed with the {side} allocator:\n{result['crash']}")
        differences = compare(name, native, fragless, allowlist)
        for key, theirs, ours, reason in differences:
            if reason is None:
                failures += 1
                print(f"FAIL {name}:{key}\n  native:   {json.dumps(theirs)}\n  fragless: {json.dumps(ours)}")
            else:
                print(f"allowed {name}:{key} ({reason})")
        if not differences and "crash" not in native and "crash" not in fragless:
            print(f"ok {name} ({len(native['observations'])} observations)")
    if not argv:
        for entry in allowlist:
            if not entry["used"] and entry["scenario"] not in skipped:
                failures += 1
                print(f"FAIL stale allow-list entry {entry['scenario']}:{entry['pattern']} (no such difference)")
    print(f"{len(names)} scenarios, {failures} failures, {len(skipped)} skipped (API absent from this torch)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
