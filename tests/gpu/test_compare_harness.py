"""The training comparison's harness (compare.py), kept working: its elementwise smoke
workload under PyTorch's allocator and fragless.install(), one short run each, must write a
table, JSON and a plot with a row per mode. (The real workloads need kernels; they run only
through `scripts/dev.sh gpu --compare` on a GPU.)"""
import json
import pathlib
import subprocess
import sys
import xml.dom.minidom

from conftest import child_environment

HERE = pathlib.Path(__file__).parent


def test_compare_writes_table_json_and_plot(tmp_path, on_simcuda):
    result = subprocess.run([sys.executable, str(HERE / "compare.py"), "--workloads", "smoke", "--modes", "install",
                             "--steps", "4", "--repetitions", "1", "--out", str(tmp_path)], capture_output=True,
                            text=True, timeout=600, env=child_environment())
    assert result.returncode == 0, result.stdout + result.stderr
    table = (tmp_path / "table.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| smoke |")]
    assert [row.split("|")[2].strip() for row in rows] == ["pytorch", "install"]
    assert all(" MiB |" in row for row in rows)
    if on_simcuda:
        assert "simcuda" in table.splitlines()[0]
    summary = json.loads((tmp_path / "results.json").read_text())["summary"]["smoke"]
    for mode in ("pytorch", "install"):
        assert summary[mode]["peak_used_bytes"] > 0 and summary[mode]["max_reserved_bytes"] > 0
        assert len(summary[mode]["losses"]) == 4
    xml.dom.minidom.parse(str(tmp_path / "peak-memory.svg"))
