"""The out-of-memory error: type, message shape (units as PyTorch prints them) and the
figures a user reads from it: the size tried and the memory allocated by PyTorch."""
import re

import torch

from observe import message_shape, split_advice


def figure(message, pattern):
    found = re.search(pattern, message)
    return found.group(1) if found else None


def run(obs):
    try:
        torch.empty(800000000 << 30, dtype=torch.uint8, device="cuda")
    except torch.OutOfMemoryError as error:
        obs.record("huge_type", type(error).__name__)
        obs.record("huge_tried", figure(str(error), r"Tried to allocate ([\d.]+ \w+)"))
        obs.record("huge_allocated", figure(str(error), r"Of the allocated memory ([\d.]+ \w+) is allocated"))
        shape, advice = split_advice(message_shape(str(error)))
        obs.record("huge_shape", shape)
        obs.record("huge_advice", advice)
    # Live memory in large tensors, cache emptied: the message must count it as allocated.
    total = torch.cuda.get_device_properties(0).total_memory
    live = [torch.empty(1 << 30, dtype=torch.uint8, device="cuda") for _ in range(3)]
    torch.cuda.empty_cache()
    try:
        torch.empty(total, dtype=torch.uint8, device="cuda")
    except torch.OutOfMemoryError as error:
        obs.record("live_tried", figure(str(error), r"Tried to allocate ([\d.]+ \w+)"))
        obs.record("live_allocated", figure(str(error), r"Of the allocated memory ([\d.]+ \w+) is allocated"))
    obs.record("num_ooms", torch.cuda.memory_stats()["num_ooms"])
    small_total = None
    try:
        torch.empty(total - (1 << 20), dtype=torch.uint8, device="cuda")
    except torch.OutOfMemoryError as error:
        small_total = figure(str(error), r"Tried to allocate ([\d.]+ \w+)")
    obs.record("almost_total_tried", small_total)
    del live
