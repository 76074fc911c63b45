#!/usr/bin/env python3
"""Runs the acceptance suite (pytest on tests/gpu) or the training comparison, on the real GPU
when the machine has one and on simcuda otherwise, and says which. `scripts/dev.sh gpu` calls
it after building.

usage: run.py [--simcuda] [pytest arguments...]
       run.py [--simcuda] --compare [compare.py arguments...]
--simcuda uses simcuda even where a GPU exists.
"""
import os
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import suite_environment  # noqa: E402


def main(arguments) -> int:
    force_simcuda = "--simcuda" in arguments
    arguments = [a for a in arguments if a != "--simcuda"]
    environment = os.environ.copy()
    environment.update(suite_environment.library_environment())
    on_gpu, description = (False, "--simcuda given") if force_simcuda else suite_environment.probe_real_gpu()
    environment["FRAGLESS_SUITE_DEVICE"] = ("gpu:" if on_gpu else "simcuda:") + description
    if on_gpu:
        environment.update(suite_environment.gpu_environment())
        print(f"acceptance suite: real GPU ({description})", flush=True)
    else:
        environment.update(suite_environment.simcuda_environment())
        print(f"acceptance suite: no real GPU ({description}); running on simcuda, "
              f"SIMCUDA_MEMORY={environment['SIMCUDA_MEMORY']}", flush=True)
    for library in (suite_environment.torch_library(), suite_environment.fragless_library(),
                    suite_environment.preload_library()):
        if not os.path.exists(library):
            print(f"acceptance suite: {library} is missing: build first (scripts/dev.sh gpu builds it)",
                  file=sys.stderr)
            return 2
    python = sys.executable
    if arguments[:1] == ["--compare"]:
        command = [python, str(HERE / "compare.py"), *arguments[1:]]
    else:
        command = [python, "-m", "pytest", "-p", "no:cacheprovider", "-rs", str(HERE), *arguments]
    os.execve(command[0], command, environment)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
