#!/usr/bin/env python3
"""Test scaffolding: generates C sources for stand-ins of the NVIDIA libraries the torch wheel
links but this machine lacks (libcufile.so.0, libcusparseLt.so.0, libnvshmem_host.so.3), so
that `import torch` loads on simcuda. The symbol list is read from the wheel itself
(`nm -D --undefined-only`), never hard-coded. Every stub prints its name to stderr and returns
an error value: these libraries must never be reached by the tests (nothing at import calls
them; a test that does sees the message and the error).

The wheel is also newer than some libraries that are installed (e.g. NCCL lacks
ncclCommResume): symbols the wheel needs that no library it loads defines are stubbed too, in
the libcufile.so.0 stand-in (every consumer that is loaded at import NEEDs it or a library that
does, and the dynamic linker resolves unversioned references from any loaded object).
Libraries are resolved with `ldd` under the caller's LD_LIBRARY_PATH.

usage: make_stub_libraries.py <torch lib dir> <output dir>
writes <output dir>/<soname>.c and <soname>.map for each library.
"""
import pathlib
import re
import subprocess
import sys

# soname -> (symbol pattern, value every stub returns: an error status or NULL)
LIBRARIES = {
    "libcufile.so.0": (re.compile(r"^cuFile"), "5001"),  # CU_FILE_DRIVER_NOT_INITIALIZED
    "libcusparseLt.so.0": (re.compile(r"^cusparseLt"), "10"),  # CUSPARSE_STATUS_NOT_SUPPORTED
    "libnvshmem_host.so.3": (re.compile(r"^nvshmem"), "0"),  # NULL pointers / void
}
PROVIDED_BY_INTERPRETER = re.compile(r"^_?Py")  # the python executable defines these
CONSUMERS = ["libtorch_cuda.so", "libtorch_nvshmem.so", "libtorch_python.so", "libtorch_cuda_linalg.so"]


def undefined_symbols(library: pathlib.Path):
    out = subprocess.run(["nm", "-D", "--undefined-only", str(library)], check=True,
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            name, _, version = parts[-1].partition("@")
            yield name, version.lstrip("@")


def defined_symbols(library: str):
    out = subprocess.run(["nm", "-D", "--defined-only", library], check=True,
                         capture_output=True, text=True).stdout
    return {line.split()[-1].partition("@")[0] for line in out.splitlines() if line.split()}


def resolved_dependencies(library: pathlib.Path):
    out = subprocess.run(["ldd", str(library)], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        match = re.search(r"=> (/\S+)", line)
        if match:
            yield match.group(1)


def main() -> int:
    torch_lib, out_dir = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    out_dir.mkdir(parents=True, exist_ok=True)
    wanted = {soname: {} for soname in LIBRARIES}
    for consumer in CONSUMERS:
        path = torch_lib / consumer
        if not path.exists():
            continue
        for name, version in undefined_symbols(path):
            for soname, (pattern, _) in LIBRARIES.items():
                if pattern.search(name):
                    wanted[soname].setdefault(name, version)
    stubbed = {name for symbols in wanted.values() for name in symbols}
    available = set()
    for consumer in CONSUMERS:
        path = torch_lib / consumer
        if path.exists():
            for dependency in resolved_dependencies(path):
                available |= defined_symbols(dependency)
            available |= defined_symbols(str(path))
    for consumer in CONSUMERS:
        path = torch_lib / consumer
        if not path.exists():
            continue
        out = subprocess.run(["nm", "-D", "--undefined-only", str(path)], check=True,
                             capture_output=True, text=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == "U":
                name, _, version = parts[1].partition("@")
                if name not in available and name not in stubbed and not version.lstrip("@").startswith("GLIBC") \
                        and not PROVIDED_BY_INTERPRETER.match(name):
                    wanted["libcufile.so.0"].setdefault(name, "")
    for soname, symbols in wanted.items():
        value = LIBRARIES[soname][1]
        lines = [f"/* Generated stand-in for {soname}: every function fails. Test scaffolding. */",
                 "#include <stdio.h>",
                 "static void report(const char* name) {",
                 f'  fprintf(stderr, "stub {soname}: %s called (not available on simcuda)\\n", name);',
                 "}"]
        for name in sorted(symbols):
            lines.append(f'__attribute__((visibility("default"))) long {name}(void) '
                         f'{{ report("{name}"); return {value}; }}')
        (out_dir / f"{soname}.c").write_text("\n".join(lines) + "\n")
        # One version node per version the consumers ask for (an anonymous node cannot sit
        # next to named ones: unversioned names join the first named node).
        versions = sorted({v for v in symbols.values() if v}) or [""]
        nodes = {v: [] for v in versions}
        for name, version in sorted(symbols.items()):
            nodes[version or versions[0]].append(name)
        map_lines = []
        for index, version in enumerate(versions):
            local = " local: *;" if index == len(versions) - 1 else ""
            names = " ".join(f"{n};" for n in nodes[version])
            map_lines.append(f"{version} {{ global: {names}{local} }};".lstrip())
        (out_dir / f"{soname}.map").write_text("\n".join(map_lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
