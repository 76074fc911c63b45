"""Loads fragless's PyTorch-style snapshot pickle with Python's own pickle module and runs
PyTorch's memory_viz analyses on it (torch/cuda/_memory_viz.py from the torch wheel, which
imports only the standard library): segsum, segments, memory and trace. Checks that every
segment and block is seen with PyTorch's key names and states.

usage: check_pickle_with_memory_viz.py SUMMARY_DUMP_EXE MEMORY_VIZ_PY"""
import importlib.util
import io
import pickle
import subprocess
import sys


def main():
    exe, viz_path = sys.argv[1], sys.argv[2]
    raw = subprocess.run([exe, "--snapshot-pickle"], check=True, capture_output=True).stdout
    # Python's full unpickler, restricted to nothing: fails if any global is referenced.
    class NoGlobals(pickle.Unpickler):
        def find_class(self, module, name):
            raise AssertionError(f"pickle references {module}.{name}")

    data = NoGlobals(io.BytesIO(raw)).load()
    assert set(data) >= {"segments", "device_traces"}, data.keys()
    assert len(data["device_traces"]) == 2
    segments = data["segments"]
    assert [s["device"] for s in segments] == [0, 0, 1]
    assert segments[2]["address"] == 0xFFFFF00000000000
    assert segments[1]["stream"] == 0x55AA and segments[1]["is_expandable"] is True
    assert [b["state"] for b in segments[1]["blocks"]] == ["active_allocated", "active_pending_free", "inactive"]
    for seg in segments:
        assert sum(b["size"] for b in seg["blocks"]) == seg["total_size"]
        assert seg["allocated_size"] == sum(b["size"] for b in seg["blocks"] if b["state"] == "active_allocated")
        assert seg["active_size"] == sum(b["size"] for b in seg["blocks"] if b["state"] != "inactive")

    spec = importlib.util.spec_from_file_location("memory_viz", viz_path)
    viz = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(viz)
    summary = viz.segsum(data)
    assert "Segment size mismatch" not in summary, summary
    assert summary.count("allocated,") >= 1 or summary.count("segment") >= 1, summary
    flame = viz.segments(data, format_flamegraph=lambda lines: lines)
    # One line per block (its requested bytes), plus a "<gaps>" line for the rounding.
    assert flame.count(";active_allocated;<non-python> ") == 3, flame
    assert flame.count(";inactive;<non-python> ") == 2, flame
    assert "stream_21930;seg_" in flame, flame
    viz.memory(data, format_flamegraph=lambda lines: lines)
    viz.trace(data)
    print("memory_viz read the fragless pickle:", len(segments), "segments")
    return 0


if __name__ == "__main__":
    sys.exit(main())
