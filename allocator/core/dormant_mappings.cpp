// The table of dormant ranges (see dormant_mappings.hpp; Note [Dormant mappings] in
// vmm_pool_dormant.cpp).
#include "core/dormant_mappings.hpp"

#include <utility>

namespace fragless::core {

dormant_mappings::dormant_mappings(std::size_t page_count) : slot_of_page_(page_count, 0), pages_(page_count) {}

const dormant_mappings::mapping* dormant_mappings::of_handle(backend::physical_handle handle) const noexcept {
  if (slot_count_ == 0) return nullptr;
  const auto found = handle_slots_.find(handle);
  return found == handle_slots_.end() ? nullptr : &slots_[found->second - 1];
}

void dormant_mappings::mark_pages(std::size_t head, std::size_t pages, std::uint32_t slot) noexcept {
  for (std::size_t page = head; page < head + pages; ++page) slot_of_page_[page] = slot;
  if (slot != 0)
    pages_.insert_range(head, head + pages);
  else
    pages_.erase_range(head, head + pages);
}

bool dormant_mappings::add(std::size_t head, std::size_t pages, backend::physical_handle handle,
                           std::size_t active_head) noexcept {
  std::uint32_t slot = 0;
  try {
    if (free_slots_.empty()) {
      free_slots_.reserve(slots_.size() + 1);  // remove() then never allocates
      slots_.push_back(mapping{});
      slot = static_cast<std::uint32_t>(slots_.size());
    } else {
      slot = free_slots_.back();
      free_slots_.pop_back();
    }
    if (!handle_slots_.emplace(handle, slot).second) {
      free_slots_.push_back(slot);  // a precondition broken: keep the table as it was
      return false;
    }
  } catch (...) {
    if (slot != 0) free_slots_.push_back(slot);  // reserved above: cannot throw
    return false;
  }
  slots_[slot - 1] = mapping{head, pages, handle, active_head};
  mark_pages(head, pages, slot);
  ++slot_count_;
  return true;
}

void dormant_mappings::remove(std::size_t head) noexcept {
  const std::uint32_t slot = slot_of_page_[head];
  if (slot == 0) return;
  mapping& entry = slots_[slot - 1];
  if (!entry.orphaned) handle_slots_.erase(entry.handle);
  mark_pages(entry.head, entry.pages, 0);
  entry = mapping{};
  free_slots_.push_back(slot);  // capacity reserved in add()
  --slot_count_;
}

void dormant_mappings::set_active_head(backend::physical_handle handle, std::size_t active_head) noexcept {
  const auto found = handle_slots_.find(handle);
  if (found != handle_slots_.end()) slots_[found->second - 1].active_head = active_head;
}

void dormant_mappings::orphan(backend::physical_handle handle) noexcept {
  const auto found = handle_slots_.find(handle);
  if (found == handle_slots_.end()) return;
  slots_[found->second - 1].active_head = npos;
  slots_[found->second - 1].orphaned = true;
  handle_slots_.erase(found);  // the driver may hand the same value out again
}

const dormant_mappings::mapping* dormant_mappings::first_orphan() const noexcept {
  if (slot_count_ == 0) return nullptr;
  for (const mapping& entry : slots_)
    if (entry.orphaned) return &entry;
  return nullptr;
}

void dormant_mappings::swap_with_active(std::size_t head) noexcept {
  const std::uint32_t slot = slot_of_page_[head];
  mapping& entry = slots_[slot - 1];
  mark_pages(entry.head, entry.pages, 0);
  std::swap(entry.head, entry.active_head);
  mark_pages(entry.head, entry.pages, slot);
}

}  // namespace fragless::core
