// PyTorch's out-of-memory message, figure for figure, so that code and people reading
// torch.OutOfMemoryError see the same text whichever allocator runs (sizes in bytes, KiB,
// MiB or GiB with two decimals, never TiB: PyTorch's format_size).
// Invariant: the text up to "... is reserved by PyTorch but unallocated." is PyTorch's;
// only the closing advice is fragless's (PyTorch's names PYTORCH_CUDA_ALLOC_CONF options
// fragless does not read).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace fragless::torch {

// PyTorch's format_size: "512 bytes", "1.50 KiB", "20.00 MiB", "800000000.00 GiB".
std::string format_size(std::uint64_t size_bytes);

struct out_of_memory_figures {
  std::size_t request_bytes = 0;
  int device = 0;
  std::size_t device_total_bytes = 0;
  std::size_t device_free_bytes = 0;
  std::optional<std::size_t> allowed_bytes;  // set_per_process_memory_fraction was called
  std::size_t allocated_bytes = 0;           // every live block, private pools' included
  std::size_t reserved_bytes = 0;
  // Free memory cached in private pools: PyTorch counts it as allocated (nothing outside
  // the pool can use it) and names it apart.
  std::size_t private_pool_free_bytes = 0;
};

std::string out_of_memory_message(const out_of_memory_figures& figures);

}  // namespace fragless::torch
