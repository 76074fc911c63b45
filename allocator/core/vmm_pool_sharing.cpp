// The VMM pool's side of sharing memory with other processes (Note [IPC sharing] in
// core/ipc_sharing.hpp): which physical allocations lie under a block. Reads only.
#include "core/vmm_pool.hpp"

namespace fragless::core {

std::vector<large_pool::shared_piece> vmm_pool::shared_pieces(std::uintptr_t address, std::size_t bytes) const {
  std::vector<shared_piece> pieces;
  if (bytes == 0) return pieces;
  const std::uintptr_t end = address + bytes;
  // A dedicated or stitched mapping holding the block.
  auto mapping = dedicated_.upper_bound(address);
  if (mapping != dedicated_.begin()) {
    --mapping;
    const dedicated_mapping& found = mapping->second;
    if (address < mapping->first + found.bytes) {
      if (end > mapping->first + found.bytes) return pieces;
      if (found.handles.size() == 1) {
        pieces.push_back(shared_piece{mapping->first, found.bytes, found.handles.front()});
        return pieces;
      }
      const std::size_t page_bytes = pages_.page_bytes();
      for (std::size_t page = (address - mapping->first) / page_bytes; page < found.handles.size(); ++page) {
        const std::uintptr_t base = mapping->first + page * page_bytes;
        if (base >= end) break;
        pieces.push_back(shared_piece{base, page_bytes, found.handles[page]});
      }
      return pieces;
    }
  }
  // Pages of the shared range.
  if (address < range_base_ || end > range_base_ + range_bytes_) return pieces;
  // Whole chunks (Note [Physical chunks]): the first may start before the block.
  for (std::size_t page = pages_.first_page(address); page < pages_.end_page(address, bytes);) {
    if (!pages_.is_mapped(page)) return {};
    const std::size_t head = pages_.chunk_head(page);
    const std::size_t count = pages_.chunk_pages(head);
    pieces.push_back(shared_piece{pages_.page_address(head), count * pages_.page_bytes(), pages_.handle(head)});
    page = head + count;
  }
  return pieces;
}

}  // namespace fragless::core
