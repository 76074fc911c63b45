// peer_pytorch: factory for PyTorch's native CUDACachingAllocator (libc10_cuda from the
// pinned wheel). Its settings come from PYTORCH_CUDA_ALLOC_CONF, read once per process at
// first use, so each variant runs in its own child process (see cli/child_runner).
#pragma once
#include "replay_allocator.hpp"
namespace fragless::bench {
// Returns null and fills `why_not` when the wheel's allocator cannot start.
std::unique_ptr<replay_allocator> make_pytorch_peer(std::string& why_not);
}
