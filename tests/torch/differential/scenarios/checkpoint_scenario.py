"""Checkpoint state of a private pool, used the way torch.compile's CUDA graph trees use it
(torch/_inductor/cudagraph_trees.py): after setCheckpointPoolState the pool's live blocks
are the checkpoint's, at the same addresses, handed to storages made from raw pointers;
memory_allocated and checkPoolLiveAllocations agree."""
import torch


def run(obs):
    device = torch.device("cuda", 0)
    pool = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(pool):
        kept = torch.empty(1 << 20, device="cuda")
        dies = torch.empty(3000, device="cuda")
    kept_address, kept_bytes = kept.data_ptr(), kept.untyped_storage().nbytes()
    dies_address = dies.data_ptr()
    allocated_at_checkpoint = torch.cuda.memory_allocated()
    state = torch._C._cuda_getCheckpointState(0, pool.id)
    obs.record("state_type", type(state).__name__)
    # After the checkpoint one block dies and another is allocated in the pool.
    del dies
    obs.record("allocated_after_free", allocated_at_checkpoint - torch.cuda.memory_allocated())
    with torch.cuda.use_mem_pool(pool):
        later = torch.empty(5000, device="cuda")
    obs.record("later_reuses_dead_block", later.data_ptr() == dies_address)
    # Restore. Every block live now is freed, so both storages are stale (their deleters are
    # taken away); a storage made from kept's raw pointer gets the restored block's deleter.
    alias = torch._C._construct_storage_from_data_pointer(kept_address, device, kept_bytes)
    stale = [later.untyped_storage()._cdata, kept.untyped_storage()._cdata]
    torch._C._cuda_setCheckpointPoolState(0, state, stale, [alias._cdata])
    obs.record("allocated_restored", torch.cuda.memory_allocated() - allocated_at_checkpoint)
    obs.record("live_matches_checkpoint", torch._C._cuda_checkPoolLiveAllocations(
        0, pool.id, {kept_address, dies_address}))
    obs.record("alias_has_standard_deleter", torch._C._has_Standard_Deleter(alias._cdata))
    obs.record("kept_has_standard_deleter", torch._C._has_Standard_Deleter(kept.untyped_storage()._cdata))
    # The block that died before the restore is live again; graph trees free it by pointer.
    torch._C._cuda_cudaCachingAllocator_raw_delete(dies_address)
    obs.record("live_after_raw_delete", torch._C._cuda_checkPoolLiveAllocations(0, pool.id, {kept_address}))
    del later, kept
    obs.record("alias_keeps_block", torch._C._cuda_checkPoolLiveAllocations(0, pool.id, {kept_address}))
    del alias
    obs.record("allocated_after_all_freed", allocated_at_checkpoint - torch.cuda.memory_allocated())
    obs.record("pool_live_after_all_freed", torch._C._cuda_checkPoolLiveAllocations(0, pool.id, set()))
    del state
    with torch.cuda.use_mem_pool(pool):
        again = torch.empty(3000, device="cuda")
    obs.record("state_gone_memory_reused", again.data_ptr() in (dies_address, kept_address))
    del again
