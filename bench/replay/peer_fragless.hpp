// peer_fragless: factory for the libfragless peer. Its configuration comes from
// FRAGLESS_CONF in the child's environment (set by the runner for named configurations).
#pragma once
#include "replay_allocator.hpp"
namespace fragless::bench {
std::unique_ptr<replay_allocator> make_fragless_peer(const std::string& configuration, std::string& why_not);
}
