"""One side of a differential scenario: runs a scenario script in this process with PyTorch's
native allocator or with fragless installed, and prints what a PyTorch user can observe as
JSON on its last stdout line.

    python observe.py native|fragless SCENARIO.py

Invariant: observations never contain raw addresses, times or other values that differ
between two runs of the same allocator; addresses become names in order of first sight
(Observer.name_address), so two runs compare value for value.
"""
import json
import os
import re
import runpy
import sys
import traceback
import types

_NUMBER = re.compile(r"\d+(\.\d+)?")


class Observer:
    """What a scenario records: obs.record(key, value) with JSON-able values."""

    def __init__(self, allocator):
        self.allocator = allocator  # "native" or "fragless"; scenarios must not branch on it
        self.observations = {}
        self._address_names = {}

    def record(self, key, value):
        if key in self.observations:
            raise KeyError(f"observation {key!r} recorded twice")
        self.observations[key] = value

    def name_address(self, address):
        """A stable name for an address: A0, A1, ... in order of first sight."""
        if address not in self._address_names:
            self._address_names[address] = f"A{len(self._address_names)}"
        return self._address_names[address]

    def record_exception(self, key, function):
        """Runs function and records the exception it raises: type and message shape as
        `key`, an out-of-memory message's closing advice as `key.advice`."""
        try:
            function()
        except Exception as raised:  # noqa: BLE001 -- any exception is an observation
            shape, advice = split_advice(message_shape(str(raised)))
            self.record(key, {"type": type(raised).__name__, "shape": shape})
            if advice:
                self.record(key + ".advice", advice)
            return raised
        self.record(key, None)
        return None


def message_shape(message):
    """The message's first line with every number replaced by N (units and words kept)."""
    first_line = message.strip().splitlines()[0] if message.strip() else ""
    return _NUMBER.sub("N", first_line)


_ADVICE_AFTER = "is reserved by PyTorch but unallocated."


def split_advice(message):
    """An out-of-memory message as (figures, closing advice): the advice names the
    allocator's own remedies, the figures must agree."""
    at = message.find(_ADVICE_AFTER)
    if at < 0:
        return message, ""
    at += len(_ADVICE_AFTER)
    return message[:at], message[at:].strip()


def stats_view(keys=None):
    """memory_stats() fields a user may rely on to agree between allocators."""
    import torch

    stats = torch.cuda.memory_stats()
    if keys is None:
        keys = [key for key in stats
                if key.split(".")[0] in ("allocated_bytes", "active_bytes", "requested_bytes", "allocation", "active")
                and ".all." in key]
    return {key: stats.get(key) for key in sorted(keys)}


def frame_view(frames):
    """A stack as the functions of the scenario files and of the steps they share
    (*_steps.py) on it (other frames are torch's own)."""
    return [frame["name"] for frame in frames if frame.get("filename", "").endswith(("_scenario.py", "_steps.py"))]


def has_cpp_frames(frames):
    return any(frame.get("filename", "").endswith((".cpp", ".h", ".cc")) or "c10::" in frame.get("name", "")
               or "at::" in frame.get("name", "") for frame in frames)


def block_of(snapshot, address):
    """The snapshot block starting at address (snapshot: torch.cuda.memory._snapshot())."""
    for segment in snapshot["segments"]:
        for block in segment["blocks"]:
            if block["address"] == address:
                return segment, block
    return None, None


def tensor_block_view(obs, snapshot, tensor):
    """The block under a tensor: sizes, state and the scenario functions on its stack."""
    segment, block = block_of(snapshot, tensor.untyped_storage().data_ptr())
    if block is None:
        return None
    return {"size": block["size"], "requested_size": block["requested_size"], "state": block["state"],
            "frames": frame_view(block.get("frames", [])), "has_frames": bool(block.get("frames")),
            "segment_pool_id": list(segment.get("segment_pool_id", (0, 0)))}


def trace_view(obs, snapshot, actions=("alloc", "free_requested", "free_completed", "oom", "annotate")):
    """Device 0's history entries of the given actions, in order: action, named address
    (size for oom), size, the scenario functions on the stack, user metadata."""
    entries = []
    for entry in snapshot["device_traces"][0] if snapshot["device_traces"] else []:
        if entry["action"] not in actions:
            continue
        view = {"action": entry["action"], "size": entry["size"],
                "frames": frame_view(entry.get("frames", [])), "has_frames": bool(entry.get("frames"))}
        if entry["action"] != "oom":
            view["addr"] = obs.name_address(entry["addr"])
        if entry.get("user_metadata"):
            view["user_metadata"] = entry["user_metadata"]
        entries.append(view)
    return entries


def torch_version():
    import torch

    return torch.__version__


def main():
    allocator, scenario = sys.argv[1], sys.argv[2]
    if allocator == "fragless":
        import fragless

        fragless.install()
    observer = Observer(allocator)
    try:
        namespace = runpy.run_path(scenario)
        namespace["run"](observer)
        result = {"observations": observer.observations}
    except AttributeError as error:
        # An API this torch release does not have (torch.* module attribute): the scenario
        # does not apply to it. The runner skips it only if both allocators say so.
        missing = isinstance(getattr(error, "obj", None), types.ModuleType) and \
            getattr(error.obj, "__name__", "").startswith("torch")
        if missing:
            result = {"observations": observer.observations,
                      "skipped": f"torch {torch_version()} has no {error.obj.__name__}.{error.name}"}
        else:
            result = {"observations": observer.observations, "crash": traceback.format_exc()}
    except Exception:  # noqa: BLE001 -- a crashing scenario is reported, not compared
        result = {"observations": observer.observations, "crash": traceback.format_exc()}
    sys.stdout.flush()
    os.write(1, ("\n" + json.dumps(result, sort_keys=True) + "\n").encode())


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
