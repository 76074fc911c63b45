#!/usr/bin/env python3
"""The counting interposer against simcuda's own counters (Note [Counting device calls]).

On a real GPU fragless-bench counts device calls with libfragless_bench_counting.so, an
LD_PRELOADed interposer; on simcuda with simcuda's counters. This test replays workloads
through every peer both ways, on simcuda, and asserts the two agree call by call: every
counted total, the steady-state calls, each priced function's calls in the first and the
steady pass, the bytes in use (simcuda's account against cudaMemGetInfo), the peaks.
Then it runs the parent in "real GPU" mode (FRAGLESS_BENCH_COUNTING=interposer: no simcuda
control API at all) -- `builtin` and `main` with the fit rows on a small device -- and checks
the rows against a simcuda run at the same capacity, and the report's device lines.

    counting_differential.py FRAGLESS_BENCH COUNTING_LIBRARY WORK_DIR [SHARED_TRACES_DIR]
"""
import json
import os
import shutil
import subprocess
import sys

BENCH, LIBRARY, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
SHARED = sys.argv[4] if len(sys.argv) > 4 else ""
PEERS = ["fragless", "pytorch", "pytorch-expandable", "cudamalloc"]
SOURCES = [
    "builtin:transformer-training:layers=2,steps=2",
    "builtin:kv-cache-inference:layers=4,steps=8",
    "builtin:cnn-training:steps=1",
    "corpus:many-streams:1",       # several streams
    "corpus:huge-tensors:2",
]
# Fields of the child protocol that must be identical whichever counter counts.
SAME = ["status", "events_replayed", "device_allocs", "device_frees", "device_maps", "device_unmaps", "syncs",
        "steady_calls", "calls_by_pass", "ooms", "peak_reserved_bytes", "peak_live_bytes", "device_used_peak_bytes"]
failures = []


def environment(interposer, **extra):
    env = dict(os.environ)
    env.pop("FRAGLESS_BENCH_COUNTING", None)
    env.pop("FRAGLESS_CONF", None)
    if interposer:
        env["FRAGLESS_BENCH_COUNTING"] = "interposer"
    env.update(extra)
    return env


def replay_one(source, peer, interposer):
    env = environment(interposer)
    if interposer:
        env["LD_PRELOAD"] = LIBRARY
    if peer == "pytorch-expandable":
        env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    run = subprocess.run([BENCH, "replay-one", "--source", source, "--allocator", peer, "--repetitions", "2",
                          "--max-events", "20000", "--timeout", "300"],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
    fields, passes = {}, {}
    for line in run.stdout.splitlines():
        key, _, value = line.partition("\t")
        if key == "pass":
            parts = value.split("\t")
            # name host_ns obtained returned calls...: all but the host time must agree.
            passes[parts[0]] = parts[2:]
        elif key != "point":
            fields[key] = value
    return fields, passes, run.stderr


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL:", message)


def differential():
    compared = 0
    for source in SOURCES + shared_sources():
        for peer in PEERS:
            simcuda, simcuda_passes, _ = replay_one(source, peer, False)
            counted, counted_passes, errors = replay_one(source, peer, True)
            if simcuda.get("status") == "unavailable" and counted.get("status") == "unavailable":
                print(f"skip: {peer} not available ({simcuda.get('unavailable', '')})")
                continue
            where = f"{source} / {peer}"
            check(simcuda.get("status") == "ok", f"{where}: simcuda run: {simcuda.get('status')}")
            check(simcuda.get("counters_available") == "1" and counted.get("counters_available") == "1",
                  f"{where}: counters not available ({errors.strip()[-300:]})")
            for key in SAME:
                check(simcuda.get(key) == counted.get(key),
                      f"{where}: {key}: simcuda {simcuda.get(key)} != interposer {counted.get(key)}")
            check(simcuda_passes == counted_passes,
                  f"{where}: per-function pass calls: simcuda {simcuda_passes} != interposer {counted_passes}")
            total = sum(int(simcuda.get(k, "0")) for k in ("device_allocs", "device_frees", "device_maps", "device_unmaps"))
            check(total > 0, f"{where}: no device call counted")
            compared += 1
            print(f"ok: {where}: {total} device calls, steady {simcuda.get('steady_calls')}, "
                  f"syncs {simcuda.get('syncs')}, first pass {simcuda_passes.get('first')}")
    check(compared >= len(SOURCES) * 2, f"only {compared} replays compared")


def shared_sources():
    if not SHARED or not os.path.isdir(SHARED):
        return []
    path = os.path.join(SHARED, "silmont2000+assignment2-systems", "memory_forward_fp32_128.pickle")
    return ["file:" + path] if os.path.exists(path) else []


def bench_json(arguments, interposer, **extra):
    run = subprocess.run([BENCH] + arguments, env=environment(interposer, **extra), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, check=False)
    check(run.returncode == 0, f"{' '.join(arguments[:2])} (interposer={interposer}) exit {run.returncode}: {run.stderr[-500:]}")
    return run


def rows_by_key(report):
    return {(r["trace"], r["allocator"]): r for r in report["rows"] if not r["trace"].startswith("geomean")}


ROW_FIELDS = ["status", "device_calls", "device_allocs", "device_frees", "device_maps", "device_unmaps", "syncs",
              "steady_calls", "calls_by_pass", "ooms", "peak_reserved_bytes", "device_used_peak_bytes", "max_fitting_batch"]


def compare_reports(simcuda, counted, what):
    a, b = rows_by_key(simcuda), rows_by_key(counted)
    check(a.keys() == b.keys(), f"{what}: different rows")
    for key in a:
        for field in ROW_FIELDS:
            check(a[key].get(field) == b[key].get(field),
                  f"{what}: {key} {field}: simcuda {a[key].get(field)} != interposer {b[key].get(field)}")
    replayed = [r for r in b.values() if r["allocator"] in PEERS and r["status"] == "ok"]
    check(len(replayed) >= 2, f"{what}: only {len(replayed)} replayed rows ok")
    check(all((r.get("device_calls") or 0) > 0 for r in replayed), f"{what}: a replayed row without device calls")
    check(simcuda["device"].startswith("simcuda"), f"{what}: simcuda device line {simcuda['device']!r}")
    check("real GPU" in counted["device"] and "counting" in counted["counting"] + "counting",
          f"{what}: interposer device line {counted['device']!r}")
    check("libfragless_bench_counting.so" in counted["counting"], f"{what}: counting line {counted['counting']!r}")


def parent_runs():
    os.makedirs(WORK, exist_ok=True)
    # builtin through the parent: the parent preloads the counter itself.
    spec = "kv-cache-inference:layers=4,steps=8"
    reports = []
    for interposer in (False, True):
        run = bench_json(["builtin", spec, "--repetitions", "2", "--json", "-"], interposer)
        reports.append(json.loads(run.stdout) if run.returncode == 0 else None)
    if all(reports):
        compare_reports(reports[0], reports[1], "builtin")

    # main with the fit rows on a 1 GiB device: simcuda sets the capacity, the "real GPU"
    # run takes the device's memory as it (Note [Capacity on a real GPU]).
    traces = os.path.join(WORK, "traces")
    shutil.rmtree(traces, ignore_errors=True)
    os.makedirs(traces)
    generated = subprocess.run([BENCH, "generate", "moe-routing", "--seed", "3", "-o", os.path.join(traces, "moe3.trace")],
                               env=environment(False), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    check(generated.returncode == 0, f"generate: {generated.stderr}")
    main_reports = []
    for interposer in (False, True):
        out = os.path.join(WORK, "main-interposer" if interposer else "main-simcuda")
        arguments = ["main", "transformer-training:model=256,layers=2,steps=1,sequence=256", "--traces", traces,
                     "--out", out, "--repetitions", "2", "--no-table", "--allocators", "fragless,pytorch,cudamalloc"]
        if not interposer:
            arguments += ["--capacity", "1GiB"]
        run = bench_json(arguments, interposer, SIMCUDA_MEMORY="1GiB", FRAGLESS_BENCH_DEVICE="")
        if run.returncode == 0:
            with open(os.path.join(out, "results.json")) as f:
                main_reports.append(json.load(f))
            with open(os.path.join(out, "table.txt")) as f:
                check(f.readline().startswith("device: "), f"{out}/table.txt: no device line first")
    if len(main_reports) == 2:
        compare_reports(main_reports[0], main_reports[1], "main")
        fits = [r for r in main_reports[1]["rows"] if r.get("max_fitting_batch")]
        check(len(fits) >= 2, f"main: {len(fits)} fit rows in the interposer run")
        check("1.00 GiB" in main_reports[1]["capacity"], f"main: capacity line {main_reports[1]['capacity']!r}")
        print("ok: main: fit rows", [(r["allocator"], r["max_fitting_batch"]) for r in fits])

    # A real GPU's capacity cannot be set, nor call prices: one line each, nothing run.
    for arguments, wanted in ((["--capacity", "2GiB"], "more than the device's memory"),
                              (["--capacity", "512MiB"], "less than the device's memory"),
                              (["--device-call-ns", "100"], "--device-call-ns is simcuda-only")):
        run = subprocess.run([BENCH, "builtin", spec, "--repetitions", "1", "--no-table"] + arguments,
                             env=environment(True, SIMCUDA_MEMORY="1GiB"), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        check(run.returncode != 0 and wanted in run.stderr and len(run.stderr.strip().splitlines()) == 1,
              f"refusal {arguments}: exit {run.returncode}, stderr {run.stderr!r}")


def exports():
    """Rule 9: the library exports the counted functions, the getters and its own API only."""
    allowed = {"cudaMalloc", "cudaFree", "cudaMallocAsync", "cudaFreeAsync", "cudaDeviceSynchronize",
               "cudaStreamSynchronize", "cudaEventSynchronize", "cudaEventRecord", "cudaStreamWaitEvent",
               "cudaEventQuery", "cudaGetDriverEntryPoint",
               "cudaGetDriverEntryPointByVersion", "cuMemCreate", "cuMemRelease", "cuMemAlloc_v2", "cuMemFree_v2",
               "cuMemAllocAsync", "cuMemFreeAsync", "cuMemMap", "cuMemUnmap", "cuMemSetAccess",
               "cuMemAddressReserve", "cuMemAddressFree", "cuCtxSynchronize", "cuCtxSynchronize_v2",
               "cuStreamSynchronize", "cuEventSynchronize", "cuGetProcAddress_v2"}
    try:
        listing = subprocess.run(["nm", "-D", "--defined-only", LIBRARY], stdout=subprocess.PIPE, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as error:
        check(False, f"nm -D {LIBRARY}: {error}")
        return
    names = {line.split()[-1].split("@")[0] for line in listing.stdout.splitlines() if line.split()[1:2] != ["A"]}
    extra = sorted(n for n in names if n not in allowed and not n.startswith("fragless_bench_counting_"))
    check(not extra, f"{LIBRARY} exports {extra}")
    check(allowed <= names, f"{LIBRARY} lacks {sorted(allowed - names)}")


exports()
differential()
parent_runs()
if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("counting interposer agrees with simcuda's counters")
