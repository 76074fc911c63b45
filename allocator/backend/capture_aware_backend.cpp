// The capture-aware decorator (Note [Capture underway] in capture_aware_backend.hpp).
#include "backend/capture_aware_backend.hpp"

namespace fragless::backend {
namespace {

class capture_aware_backend final : public backend {
 public:
  explicit capture_aware_backend(std::unique_ptr<backend> wrapped) : wrapped_(std::move(wrapped)) {}

  const char* name() const noexcept override { return wrapped_->name(); }
  int device_count() noexcept override { return wrapped_->device_count(); }
  status get_memory_info(int device, memory_info* info) noexcept override {
    return wrapped_->get_memory_info(device, info);
  }
  status stream_device(stream_handle stream, int fallback_device, int* device) noexcept override {
    return wrapped_->stream_device(stream, fallback_device, device);
  }
  status synchronize_device(int device) noexcept override {
    if (capture_underway()) return held_back();
    return wrapped_->synchronize_device(device);
  }
  std::string last_error_text() noexcept override {
    if (held_back_last_) return "held back while a CUDA graph capture is underway (Note [Capture underway])";
    return wrapped_->last_error_text();
  }
  status malloc_segment(int device, std::size_t bytes, void** address) noexcept override {
    return passed(wrapped_->malloc_segment(device, bytes, address));
  }
  status free_segment(int device, void* address) noexcept override {
    if (capture_underway()) return held_back();
    return passed(wrapped_->free_segment(device, address));
  }
  bool supports_vmm(int device) noexcept override { return wrapped_->supports_vmm(device); }
  std::size_t vmm_granularity_bytes(int device) noexcept override { return wrapped_->vmm_granularity_bytes(device); }
  status reserve_address_range(int device, std::size_t bytes, std::uintptr_t* base) noexcept override {
    return passed(wrapped_->reserve_address_range(device, bytes, base));
  }
  status free_address_range(int device, std::uintptr_t base, std::size_t bytes) noexcept override {
    if (capture_underway()) return held_back();
    return passed(wrapped_->free_address_range(device, base, bytes));
  }
  status create_physical(int device, std::size_t bytes, physical_handle* handle) noexcept override {
    return passed(wrapped_->create_physical(device, bytes, handle));
  }
  status release_physical(int device, physical_handle handle) noexcept override {
    if (capture_underway()) return held_back();
    return passed(wrapped_->release_physical(device, handle));
  }
  status map(int device, std::uintptr_t address, std::size_t bytes, physical_handle handle) noexcept override {
    return passed(wrapped_->map(device, address, bytes, handle));
  }
  status map_without_access(int device, std::uintptr_t address, std::size_t bytes,
                            physical_handle handle) noexcept override {
    return passed(wrapped_->map_without_access(device, address, bytes, handle));
  }
  status set_access(int device, std::uintptr_t address, std::size_t bytes) noexcept override {
    return passed(wrapped_->set_access(device, address, bytes));
  }
  status unmap(int device, std::uintptr_t address, std::size_t bytes) noexcept override {
    if (capture_underway()) return held_back();
    return passed(wrapped_->unmap(device, address, bytes));
  }
  status create_event(int device, event_handle* event) noexcept override {
    return passed(wrapped_->create_event(device, event));
  }
  status destroy_event(int device, event_handle event) noexcept override {
    return passed(wrapped_->destroy_event(device, event));
  }
  status record_event(int device, event_handle event, stream_handle stream) noexcept override {
    return passed(wrapped_->record_event(device, event, stream));
  }
  status query_event(int device, event_handle event) noexcept override {
    if (capture_underway()) return status::not_ready;
    return passed(wrapped_->query_event(device, event));
  }
  status stream_wait_event(int device, stream_handle stream, event_handle event) noexcept override {
    return passed(wrapped_->stream_wait_event(device, stream, event));
  }
  status export_physical(int device, physical_handle handle, int* file_descriptor) noexcept override {
    return passed(wrapped_->export_physical(device, handle, file_descriptor));
  }
  status import_physical(int device, int file_descriptor, physical_handle* handle) noexcept override {
    return passed(wrapped_->import_physical(device, file_descriptor, handle));
  }
  status export_segment(int device, void* base, ipc_segment_handle* handle) noexcept override {
    return passed(wrapped_->export_segment(device, base, handle));
  }
  status open_segment(int device, const ipc_segment_handle& handle, void** base) noexcept override {
    return passed(wrapped_->open_segment(device, handle, base));
  }
  status close_segment(int device, void* base) noexcept override {
    if (capture_underway()) return held_back();
    return passed(wrapped_->close_segment(device, base));
  }

 private:
  // The last failure's text belongs to whichever call failed last on this thread.
  status held_back() noexcept {
    held_back_last_ = true;
    return status::error;
  }
  status passed(status result) noexcept {
    if (result != status::ok) held_back_last_ = false;
    return result;
  }

  std::unique_ptr<backend> wrapped_;
  static thread_local bool held_back_last_;
};

thread_local bool capture_aware_backend::held_back_last_ = false;

}  // namespace

std::unique_ptr<backend> make_capture_aware(std::unique_ptr<backend> wrapped) {
  if (!wrapped) return nullptr;
  try {
    return std::make_unique<capture_aware_backend>(std::move(wrapped));
  } catch (...) {
    return nullptr;
  }
}

}  // namespace fragless::backend
