"""The out-of-memory message while a private pool holds memory: the figures PyTorch gives
for it (allocated, reserved but unallocated) and the message shape."""
import torch

from observe import message_shape, split_advice


def run(obs):
    pool = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(pool):
        in_pool = torch.empty(3 << 20, dtype=torch.uint8, device="cuda")
        freed_in_pool = torch.empty(5 << 20, dtype=torch.uint8, device="cuda")
    outside = torch.empty(7 << 20, dtype=torch.uint8, device="cuda")
    del freed_in_pool
    try:
        torch.empty(1 << 50, dtype=torch.uint8, device="cuda")
    except torch.OutOfMemoryError as error:
        shape, _ = split_advice(message_shape(str(error)))
        obs.record("shape", shape)
        text = str(error)
        obs.record("allocated_phrase", text[text.find("Of the allocated memory"):text.find(" is allocated by PyTorch")])
    del in_pool, outside
