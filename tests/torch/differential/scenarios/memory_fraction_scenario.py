"""set_per_process_memory_fraction: 0.0 is accepted (nothing may be allocated), the fraction
reads back, out-of-range values are refused, and 1.0 restores allocation."""
import re

import torch


def run(obs):
    torch.empty(1, device="cuda")  # initialise the allocator
    obs.record_exception("set_zero", lambda: torch.cuda.set_per_process_memory_fraction(0.0))
    obs.record("read_back_zero", torch.cuda.get_per_process_memory_fraction())
    error = obs.record_exception("allocate_under_zero", lambda: torch.empty(1 << 20, device="cuda"))
    obs.record("tried_under_zero", re.search(r"Tried to allocate ([\d.]+ \w+)", str(error)).group(1) if error else None)
    obs.record_exception("set_too_big", lambda: torch.cuda.set_per_process_memory_fraction(1.5))
    obs.record_exception("set_negative", lambda: torch.cuda.set_per_process_memory_fraction(-0.5))
    obs.record_exception("set_half", lambda: torch.cuda.set_per_process_memory_fraction(0.5))
    obs.record("read_back_half", torch.cuda.get_per_process_memory_fraction())
    total = torch.cuda.get_device_properties(0).total_memory
    obs.record_exception("allocate_over_half", lambda: torch.empty(int(total * 0.6), dtype=torch.uint8, device="cuda"))
    obs.record_exception("set_one", lambda: torch.cuda.set_per_process_memory_fraction(1.0))
    obs.record_exception("allocate_after_one", lambda: torch.empty(1 << 20, device="cuda"))
