// peer_cuda_malloc: factory for the no-caching cudaMalloc peer (see the .cpp).
#pragma once
#include "replay_allocator.hpp"
namespace fragless::bench {
std::unique_ptr<replay_allocator> make_cuda_malloc_peer();
}
