"""Runs PyTorch's own memory_summary() (the function's source, taken from the torch wheel's
torch/cuda/memory.py, executed with memory_stats() fed our JSON) and checks that fragless's
memory_summary() prints the same table: identical lines except the title's product name,
up to the end of PyTorch's table.

usage: compare_summary_with_torch.py SUMMARY_DUMP_EXE TORCH_MEMORY_PY [SEEDS]"""
import ast
import json
import subprocess
import sys


def load_torch_memory_summary(path):
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "memory_summary":
            node.decorator_list = []
            module = ast.Module(body=[node], type_ignores=[])
            return compile(module, path, "exec")
    raise SystemExit("memory_summary not found in " + path)


def main():
    exe, memory_py = sys.argv[1], sys.argv[2]
    seeds = int(sys.argv[3]) if len(sys.argv) > 3 else 50
    code = load_torch_memory_summary(memory_py)
    for seed in range(1, seeds + 1):
        out = subprocess.run([exe, str(seed)], check=True, capture_output=True, text=True).stdout
        json_text, ours = out.split("----\n", 1)
        document = json.loads(json_text)
        assert document["schema"] == "fragless.stats/1"
        stats = document["stats"]
        namespace = {
            "memory_stats": lambda device=None: stats,
            "_get_device_index": lambda device, optional=False: device,
        }
        exec(code, namespace)
        theirs = namespace["memory_summary"](device=document["device"])
        theirs_lines = theirs.splitlines()
        ours_lines = ours.splitlines()
        expected = [l.replace("PyTorch CUDA memory summary", "fragless CUDA memory summary") for l in theirs_lines]
        # PyTorch's title line has one more character of padding for its 7-letter name.
        expected[1] = expected[1][:-2] + "|" if len(expected[1]) == 78 else expected[1]
        got = ours_lines[: len(expected)]
        if got != expected:
            for i, (a, b) in enumerate(zip(expected, got)):
                if a != b:
                    print(f"seed {seed}, line {i}:\n torch:    {a!r}\n fragless: {b!r}")
                    break
            else:
                print(f"seed {seed}: line counts differ ({len(expected)} vs {len(got)})")
            return 1
    print(f"{seeds} random stats: fragless memory_summary matches torch's table")
    return 0


if __name__ == "__main__":
    sys.exit(main())
