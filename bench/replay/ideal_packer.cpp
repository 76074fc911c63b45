// ideal_packer: see header.
#include "ideal_packer.hpp"

#include "ideal.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

namespace fragless::bench {

namespace {

class packer {
public:
  std::uint64_t allocate(std::uint64_t size) {
    auto best = by_size_.lower_bound({size, 0});
    if (best == by_size_.end()) {  // the unbounded tail
      const std::uint64_t address = top_;
      top_ += size;
      span_ = std::max(span_, top_);
      return address;
    }
    const auto [free_size, address] = *best;
    erase_free(address, free_size);
    if (free_size > size) insert_free(address + size, free_size - size);
    return address;
  }

  void deallocate(std::uint64_t address, std::uint64_t size) {
    auto next = by_address_.find(address + size);
    if (next != by_address_.end()) {
      const std::uint64_t next_size = next->second;
      erase_free(address + size, next_size);
      size += next_size;
    }
    auto previous = by_address_.lower_bound(address);
    if (previous != by_address_.begin()) {
      --previous;
      if (previous->first + previous->second == address) {
        const std::uint64_t previous_address = previous->first, previous_size = previous->second;
        erase_free(previous_address, previous_size);
        address = previous_address;
        size += previous_size;
      }
    }
    if (address + size == top_) top_ = address;  // back into the tail
    else insert_free(address, size);
  }

  std::uint64_t span() const { return span_; }

private:
  void insert_free(std::uint64_t address, std::uint64_t size) {
    by_size_.insert({size, address});
    by_address_.emplace(address, size);
  }
  void erase_free(std::uint64_t address, std::uint64_t size) {
    by_size_.erase({size, address});
    by_address_.erase(address);
  }

  std::set<std::pair<std::uint64_t, std::uint64_t>> by_size_;  // (size, address)
  std::map<std::uint64_t, std::uint64_t> by_address_;          // address -> size
  std::uint64_t top_ = 0;
  std::uint64_t span_ = 0;
};

}  // namespace

packer_summary run_ideal_packer(const traces::trace& t, std::size_t event_limit) {
  packer_summary summary;
  const std::size_t end = event_limit == 0 ? t.events.size() : std::min(event_limit, t.events.size());
  packer placement;
  std::unordered_map<std::uint64_t, std::pair<std::uint64_t, std::uint64_t>> live;  // id -> (address, size)
  std::vector<std::uint32_t> touching;  // per 2 MiB page: live blocks touching it
  std::uint64_t mapped_pages = 0, peak_pages = 0;
  for (std::size_t i = 0; i < end; ++i) {
    const traces::trace_event& e = t.events[i];
    if (e.op == traces::trace_op::alloc) {
      const std::uint64_t size = round_up(e.size_bytes, block_rounding_bytes);
      const std::uint64_t address = placement.allocate(size);
      live[e.block_id] = {address, size};
      const std::uint64_t first = address / page_granule_bytes, last = (address + size - 1) / page_granule_bytes;
      if (touching.size() <= last) touching.resize(last + 1, 0);
      for (std::uint64_t page = first; page <= last; ++page) {
        if (touching[page]++ == 0) {
          ++mapped_pages;
          ++summary.page_maps;
        }
      }
      peak_pages = std::max(peak_pages, mapped_pages);
    } else {
      auto found = live.find(e.block_id);
      if (found == live.end()) continue;
      const auto [address, size] = found->second;
      live.erase(found);
      placement.deallocate(address, size);
      const std::uint64_t first = address / page_granule_bytes, last = (address + size - 1) / page_granule_bytes;
      for (std::uint64_t page = first; page <= last; ++page) {
        if (--touching[page] == 0) {
          --mapped_pages;
          ++summary.page_unmaps;
        }
      }
    }
  }
  summary.peak_mapped_bytes = peak_pages * page_granule_bytes;
  summary.address_span_bytes = placement.span();
  return summary;
}

}  // namespace fragless::bench
