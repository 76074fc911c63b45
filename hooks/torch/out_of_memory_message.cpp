// PyTorch's out-of-memory message (see out_of_memory_message.hpp).
#include "out_of_memory_message.hpp"

#include <iomanip>
#include <sstream>

namespace fragless::torch {

std::string format_size(std::uint64_t size_bytes) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(2);
  const auto size = static_cast<double>(size_bytes);
  if (size_bytes <= 1024)
    out << size_bytes << " bytes";
  else if (size_bytes <= (1ULL << 20))
    out << size / 1024.0 << " KiB";
  else if (size_bytes <= (1ULL << 30))
    out << size / 1048576.0 << " MiB";
  else
    out << size / 1073741824.0 << " GiB";
  return out.str();
}

std::string out_of_memory_message(const out_of_memory_figures& figures) {
  std::ostringstream out;
  out << "CUDA out of memory. Tried to allocate " << format_size(figures.request_bytes) << ". GPU " << figures.device
      << " has a total capacity of " << format_size(figures.device_total_bytes) << " of which "
      << format_size(figures.device_free_bytes) << " is free. ";
  if (figures.allowed_bytes) out << format_size(*figures.allowed_bytes) << " allowed; ";
  const std::size_t counted = figures.allocated_bytes + figures.private_pool_free_bytes;
  const std::size_t unallocated = figures.reserved_bytes > counted ? figures.reserved_bytes - counted : 0;
  out << "Of the allocated memory " << format_size(counted) << " is allocated by PyTorch, ";
  if (figures.private_pool_free_bytes > 0)
    out << "with " << format_size(figures.private_pool_free_bytes)
        << " allocated in private pools (e.g., CUDA Graphs), ";
  out << "and " << format_size(unallocated) << " is reserved by PyTorch but unallocated."
      << " fragless gives cached memory back before it reports an out-of-memory error: if reserved but "
         "unallocated memory is large, lower the peak of live memory (torch.cuda.memory_summary() shows it).";
  return out.str();
}

}  // namespace fragless::torch
