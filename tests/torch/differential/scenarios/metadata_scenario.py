"""torch.cuda.memory._set_memory_metadata: recorded on each trace entry the thread writes."""
import threading

import torch

from observe import trace_view


def run(obs):
    obs.record("supported", torch._C._cuda_memoryMetadataSupported())
    torch.cuda.memory._record_memory_history(max_entries=1000)
    torch.cuda.memory._set_memory_metadata("phase=forward")
    obs.record("get_after_set", torch.cuda.memory._get_memory_metadata())
    first = torch.empty(1000, device="cuda")
    torch.cuda.memory._set_memory_metadata({"phase": "backward", "step": 3})
    second = torch.empty(2000, device="cuda")
    seen_in_thread = []

    def other_thread():
        seen_in_thread.append(torch.cuda.memory._get_memory_metadata())
        third = torch.empty(3000, device="cuda")
        del third

    worker = threading.Thread(target=other_thread)
    worker.start()
    worker.join()
    obs.record("metadata_in_other_thread", seen_in_thread)
    torch.cuda.memory._set_memory_metadata("")
    del first
    obs.record("trace", trace_view(obs, torch.cuda.memory._snapshot()))
    torch.cuda.memory._record_memory_history(enabled=None)
    del second
