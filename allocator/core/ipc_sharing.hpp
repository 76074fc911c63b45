// Sharing blocks with other processes (CUDA IPC): exporting a live block as a handle other
// processes can open, and opening such handles. Invariant: every descriptor exported for a
// block stays open exactly while the block is live (closed when it is freed), and every
// imported range stays mapped until close_import.
//
// Note [IPC sharing]
// A handle names the physical memory under a block, not the block's virtual address:
//  - vmm backend: the block lies on physical allocations (2 MiB pages of the shared range,
//    or a dedicated/stitched mapping's handles). Each is exported as a POSIX file
//    descriptor (cuMemExportToShareableHandle) and the handle lists, with the exporter's
//    pid, each descriptor's number, size and identity (st_dev, st_ino). The importer takes
//    copies with pidfd_getfd (Linux 5.6+; the processes must run as the same user and
//    ptrace must not be locked down -- the mechanism PyTorch's expandable segments use),
//    checks each identity (a descriptor number reused after the exporter closed it is
//    refused, not mapped), imports them and maps them in order into a fresh virtual range.
//  - cudaMalloc backend: CUDA's cudaIpcMemHandle of the block's segment plus the offset.
// The exporter keeps its descriptors while the block is live; importers must open the
// handle before the exporter frees the block (torch.multiprocessing keeps the sender's
// storage alive until every receiver let go). Imported memory stays valid until closed,
// whatever the exporter does afterwards: mapped physical memory lives while mapped.
// Handle layout (bytes, little-endian): "FRAGLESS-IPC/1", kind (1 vmm, 2 cudaMalloc),
// device (i32), pid (i32), offset of the block from the first piece (u64), block bytes
// (u64); vmm: piece count (u32), then per piece bytes (u64), descriptor (i32), st_dev
// (u64), st_ino (u64); cudaMalloc: the 64-byte cudaIpcMemHandle.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.hpp"
#include "core/large_pool.hpp"

namespace fragless::core {

class ipc_sharing {
 public:
  explicit ipc_sharing(backend::backend& device_backend) : backend_(device_backend) {}
  ~ipc_sharing();
  ipc_sharing(const ipc_sharing&) = delete;
  ipc_sharing& operator=(const ipc_sharing&) = delete;

  // The handle of a live block lying on `pieces` (large_pool::shared_pieces). Exporting
  // the same block again returns the same handle. @throws device_error
  std::string export_block(int device, bool uses_vmm, std::uintptr_t block, std::size_t block_bytes,
                           const std::vector<large_pool::shared_piece>& pieces);
  // Hot path check before on_free.
  bool has_exports() const noexcept { return export_count_.load(std::memory_order_relaxed) != 0; }
  // The block was freed: its descriptors close (never throws).
  void on_free(std::uintptr_t block) noexcept;
  // Maps a handle from export_block (any process) and returns the block's address here.
  // @throws invalid_argument_error (malformed or stale handle), device_error
  void* import_block(const std::string& handle);
  // Unmaps what import_block mapped (never throws; unknown pointers are ignored).
  void close_import(void* pointer) noexcept;

 private:
  struct exported {
    std::string handle;
    std::vector<int> descriptors;
  };
  struct imported {
    int device = 0;
    bool uses_vmm = true;
    std::uintptr_t base = 0;  // vmm: the reserved range; cudaMalloc: the opened segment
    std::size_t bytes = 0;
    std::vector<backend::physical_handle> handles;
  };
  void* import_vmm(const std::string& handle, std::size_t at, int device, int pid, std::uint64_t offset);
  void unmap_import(const imported& mapping) noexcept;

  backend::backend& backend_;
  std::mutex mutex_;  // guards the maps below
  std::unordered_map<std::uintptr_t, exported> exported_;
  std::unordered_map<std::uintptr_t, imported> imported_;  // by the pointer import_block returned
  std::atomic<std::size_t> export_count_{0};
};

}  // namespace fragless::core
