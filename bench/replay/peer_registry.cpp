// peer_registry: peer names -> factories. Peers that were not compiled in say so.
// Invariant: every name in default_peer_names() either creates a peer or explains why not.
#include "replay_allocator.hpp"

#include "peer_cuda_malloc.hpp"
#if FRAGLESS_BENCH_HAVE_PYTORCH
#include "peer_pytorch.hpp"
#endif
#if FRAGLESS_BENCH_HAVE_FRAGLESS
#include "peer_fragless.hpp"
#endif

namespace fragless::bench {

std::vector<std::string> default_peer_names() {
  return {"fragless", "pytorch", "pytorch-expandable", "cudamalloc"};
}

bool peer_is_built(const std::string& name) {
  if (name == "cudamalloc") return true;
  if (name == "pytorch" || name == "pytorch-expandable") return FRAGLESS_BENCH_HAVE_PYTORCH != 0;
  if (name.rfind("fragless", 0) == 0) return FRAGLESS_BENCH_HAVE_FRAGLESS != 0;
  return false;
}

peer_creation create_peer(const std::string& name, [[maybe_unused]] const std::string& configuration) {
  peer_creation created;
  if (name == "cudamalloc") {
    created.allocator = make_cuda_malloc_peer();
  } else if (name == "pytorch" || name == "pytorch-expandable") {
#if FRAGLESS_BENCH_HAVE_PYTORCH
    created.allocator = make_pytorch_peer(created.unavailable_reason);
#else
    created.unavailable_reason = "not built (torch wheel not found at configure time)";
#endif
  } else if (name.rfind("fragless", 0) == 0) {
#if FRAGLESS_BENCH_HAVE_FRAGLESS
    created.allocator = make_fragless_peer(configuration, created.unavailable_reason);
#else
    created.unavailable_reason = "not built (libfragless not available at configure time)";
#endif
  } else {
    created.unavailable_reason = "unknown allocator '" + name + "'";
  }
  if (!created.allocator && created.unavailable_reason.empty()) created.unavailable_reason = "could not start";
  return created;
}

}  // namespace fragless::bench
