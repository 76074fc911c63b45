// Sharing blocks with other processes (Note [IPC sharing] in ipc_sharing.hpp).
#include "core/ipc_sharing.hpp"

#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "fragless/fragless.hpp"

namespace fragless::core {
namespace {

constexpr char kMagic[] = "FRAGLESS-IPC/1";
constexpr std::size_t kMagicBytes = sizeof kMagic - 1;
enum : std::uint8_t { kind_vmm = 1, kind_cuda_malloc = 2 };

template <typename T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

// Reads a T at `at` and advances; false when the handle is too short.
template <typename T>
bool take(const std::string& in, std::size_t& at, T* value) {
  if (in.size() < at + sizeof(T)) return false;
  std::memcpy(value, in.data() + at, sizeof(T));
  at += sizeof(T);
  return true;
}

[[noreturn]] void malformed(const char* what) {
  throw invalid_argument_error(std::string("fragless: not a fragless IPC handle (") + what + ")");
}

std::string errno_text(const char* call) { return std::string(call) + ": " + std::strerror(errno); }

// A copy of descriptor `remote` of process `pid`, or -1 with errno set.
int copy_descriptor(int pid, int remote) {
  if (pid == static_cast<int>(getpid())) return dup(remote);
#if defined(SYS_pidfd_open) && defined(SYS_pidfd_getfd)
  const int process = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (process < 0) return -1;
  const int copy = static_cast<int>(syscall(SYS_pidfd_getfd, process, remote, 0));
  const int saved = errno;
  close(process);
  errno = saved;
  return copy;
#else
  errno = ENOSYS;
  return -1;
#endif
}

}  // namespace

ipc_sharing::~ipc_sharing() {
  for (auto& [block, entry] : exported_)
    for (int descriptor : entry.descriptors) close(descriptor);
}

std::string ipc_sharing::export_block(int device, bool uses_vmm, std::uintptr_t block, std::size_t block_bytes,
                                      const std::vector<large_pool::shared_piece>& pieces) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto found = exported_.find(block); found != exported_.end()) return found->second.handle;
  if (pieces.empty())
    throw device_error("fragless: cannot share the block at " + std::to_string(block) + ": no memory lies under it");
  exported entry;
  std::string& out = entry.handle;
  out.append(kMagic, kMagicBytes);
  put<std::uint8_t>(out, uses_vmm ? kind_vmm : kind_cuda_malloc);
  put<std::int32_t>(out, device);
  put<std::int32_t>(out, static_cast<std::int32_t>(getpid()));
  put<std::uint64_t>(out, block - pieces.front().base);
  put<std::uint64_t>(out, block_bytes);
  if (!uses_vmm) {
    backend::ipc_segment_handle segment{};
    if (backend_.export_segment(device, reinterpret_cast<void*>(pieces.front().base), &segment) != backend::status::ok)
      throw device_error("fragless: cannot share a block: " + backend_.last_error_text());
    out.append(reinterpret_cast<const char*>(segment.data()), segment.size());
  } else {
    put<std::uint32_t>(out, static_cast<std::uint32_t>(pieces.size()));
    auto close_all = [&entry] {
      for (int descriptor : entry.descriptors) close(descriptor);
    };
    for (const large_pool::shared_piece& piece : pieces) {
      int descriptor = -1;
      if (backend_.export_physical(device, piece.handle, &descriptor) != backend::status::ok) {
        close_all();
        throw device_error("fragless: cannot share a block: " + backend_.last_error_text());
      }
      entry.descriptors.push_back(descriptor);
      struct ::stat identity {};
      if (fstat(descriptor, &identity) != 0) {
        const std::string text = errno_text("fstat");
        close_all();
        throw device_error("fragless: cannot share a block: " + text);
      }
      put<std::uint64_t>(out, piece.bytes);
      put<std::int32_t>(out, descriptor);
      put<std::uint64_t>(out, static_cast<std::uint64_t>(identity.st_dev));
      put<std::uint64_t>(out, static_cast<std::uint64_t>(identity.st_ino));
    }
  }
  std::string handle = entry.handle;
  exported_.emplace(block, std::move(entry));
  export_count_.store(exported_.size(), std::memory_order_relaxed);
  return handle;
}

void ipc_sharing::on_free(std::uintptr_t block) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = exported_.find(block);
  if (found == exported_.end()) return;
  for (int descriptor : found->second.descriptors) close(descriptor);
  exported_.erase(found);
  export_count_.store(exported_.size(), std::memory_order_relaxed);
}

void* ipc_sharing::import_block(const std::string& handle) {
  if (handle.size() < kMagicBytes || handle.compare(0, kMagicBytes, kMagic) != 0) malformed("no fragless header");
  std::size_t at = kMagicBytes;
  std::uint8_t kind = 0;
  std::int32_t device = 0;
  std::int32_t pid = 0;
  std::uint64_t offset = 0;
  std::uint64_t block_bytes = 0;
  if (!take(handle, at, &kind) || !take(handle, at, &device) || !take(handle, at, &pid) ||
      !take(handle, at, &offset) || !take(handle, at, &block_bytes))
    malformed("truncated header");
  if (kind == kind_vmm) return import_vmm(handle, at, device, pid, offset);
  if (kind != kind_cuda_malloc) malformed("unknown kind");
  backend::ipc_segment_handle segment{};
  if (handle.size() != at + segment.size()) malformed("bad segment handle size");
  std::memcpy(segment.data(), handle.data() + at, segment.size());
  void* base = nullptr;
  if (backend_.open_segment(device, segment, &base) != backend::status::ok)
    throw device_error("fragless: cannot open a shared block: " + backend_.last_error_text());
  auto* pointer = static_cast<char*>(base) + offset;
  imported mapping;
  mapping.device = device;
  mapping.uses_vmm = false;
  mapping.base = reinterpret_cast<std::uintptr_t>(base);
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    imported_[reinterpret_cast<std::uintptr_t>(pointer)] = mapping;
  } catch (...) {
    unmap_import(mapping);
    throw;
  }
  return pointer;
}

void* ipc_sharing::import_vmm(const std::string& handle, std::size_t at, int device, int pid, std::uint64_t offset) {
  std::uint32_t count = 0;
  if (!take(handle, at, &count) || count == 0) malformed("no pieces");
  constexpr std::size_t kPieceBytes = sizeof(std::uint64_t) * 3 + sizeof(std::int32_t);
  if (handle.size() != at + std::size_t{count} * kPieceBytes) malformed("piece list of the wrong length");
  imported mapping;
  mapping.device = device;
  std::vector<std::size_t> piece_bytes;
  auto give_back = [&] {
    for (backend::physical_handle one : mapping.handles) backend_.release_physical(device, one);
  };
  for (std::uint32_t piece = 0; piece < count; ++piece) {
    std::uint64_t bytes = 0;
    std::int32_t remote = -1;
    std::uint64_t identity_device = 0;
    std::uint64_t identity_inode = 0;
    if (!take(handle, at, &bytes) || !take(handle, at, &remote) || !take(handle, at, &identity_device) ||
        !take(handle, at, &identity_inode))
      malformed("truncated piece list");
    const int local = copy_descriptor(pid, remote);
    if (local < 0) {
      const std::string text = errno_text(pid == static_cast<int>(getpid()) ? "dup" : "pidfd_getfd");
      give_back();
      throw device_error("fragless: cannot take the exporting process's memory descriptors (" + text +
                         "): both processes must run as the same user, ptrace must not be restricted, "
                         "and the exporter must still hold the block");
    }
    struct ::stat identity {};
    const bool same = fstat(local, &identity) == 0 && static_cast<std::uint64_t>(identity.st_dev) == identity_device &&
                      static_cast<std::uint64_t>(identity.st_ino) == identity_inode;
    backend::physical_handle imported_handle = 0;
    const backend::status status = same ? backend_.import_physical(device, local, &imported_handle)
                                        : backend::status::error;
    close(local);
    if (!same) {
      give_back();
      throw invalid_argument_error("fragless: stale IPC handle: the exporting process no longer holds that block");
    }
    if (status != backend::status::ok) {
      give_back();
      throw device_error("fragless: cannot import a shared block: " + backend_.last_error_text());
    }
    mapping.handles.push_back(imported_handle);
    piece_bytes.push_back(static_cast<std::size_t>(bytes));
    mapping.bytes += static_cast<std::size_t>(bytes);
  }
  if (backend_.reserve_address_range(device, mapping.bytes, &mapping.base) != backend::status::ok) {
    give_back();
    throw device_error("fragless: cannot reserve address space for a shared block: " + backend_.last_error_text());
  }
  std::size_t mapped = 0;
  for (std::size_t piece = 0; piece < mapping.handles.size(); ++piece) {
    if (backend_.map(device, mapping.base + mapped, piece_bytes[piece], mapping.handles[piece]) != backend::status::ok) {
      const std::string text = backend_.last_error_text();
      if (mapped > 0) backend_.unmap(device, mapping.base, mapped);
      backend_.free_address_range(device, mapping.base, mapping.bytes);
      give_back();
      throw device_error("fragless: cannot map a shared block: " + text);
    }
    mapped += piece_bytes[piece];
  }
  const std::uintptr_t pointer = mapping.base + offset;
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    imported_[pointer] = mapping;
  } catch (...) {
    unmap_import(mapping);
    throw;
  }
  return reinterpret_cast<void*>(pointer);
}

void ipc_sharing::unmap_import(const imported& mapping) noexcept {
  if (!mapping.uses_vmm) {
    backend_.close_segment(mapping.device, reinterpret_cast<void*>(mapping.base));
    return;
  }
  backend_.unmap(mapping.device, mapping.base, mapping.bytes);
  backend_.free_address_range(mapping.device, mapping.base, mapping.bytes);
  for (backend::physical_handle one : mapping.handles) backend_.release_physical(mapping.device, one);
}

void ipc_sharing::close_import(void* pointer) noexcept {
  imported mapping;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = imported_.find(reinterpret_cast<std::uintptr_t>(pointer));
    if (found == imported_.end()) return;
    mapping = std::move(found->second);
    imported_.erase(found);
  }
  unmap_import(mapping);
}

}  // namespace fragless::core
