// Size-class slabs per stream shard (see small_pool.hpp).
#include "core/small_pool.hpp"

#include <algorithm>
#include <cassert>

namespace fragless::core {

stream_shard::~stream_shard() = default;

std::unique_ptr<slab> make_slab(std::uintptr_t address, std::size_t class_index, std::size_t bytes) {
  auto made = std::make_unique<slab>();
  made->address = address;
  made->bytes = bytes;
  made->class_index = static_cast<std::uint32_t>(class_index);
  made->capacity = static_cast<std::uint32_t>(made->bytes / class_size_bytes(class_index));
  made->free_slots.reserve(made->capacity);
  // Slot 0 on top of the stack: objects go out in address order.
  for (std::uint32_t slot = made->capacity; slot-- > 0;) made->free_slots.push_back(slot);
  return made;
}

void stream_shard::link(class_state& state, slab* target) noexcept {
  target->previous = nullptr;
  target->next = state.partial_head;
  if (state.partial_head != nullptr) state.partial_head->previous = target;
  state.partial_head = target;
  target->on_partial_list = true;
}

void stream_shard::unlink(class_state& state, slab* target) noexcept {
  if (target->previous != nullptr) target->previous->next = target->next;
  else state.partial_head = target->next;
  if (target->next != nullptr) target->next->previous = target->previous;
  target->previous = target->next = nullptr;
  target->on_partial_list = false;
}

slab* stream_shard::free_object(slab* owner, std::uint32_t slot) noexcept {
  class_state& state = classes_[owner->class_index];
  owner->free_slots.push_back(slot);  // capacity reserved at creation: never reallocates
  --owner->live;
  if (!owner->on_partial_list) link(state, owner);
  if (owner->live != 0) return nullptr;
  owner->emptied_at_release = next_release();  // Note [Synchronized settle]
  if (state.empty_slabs == 0) {
    ++state.empty_slabs;  // keep one empty slab per class as a cache
    return nullptr;
  }
  unlink(state, owner);
  owner->surplus = true;
  return owner;
}

void stream_shard::add_slab(std::unique_ptr<slab> fresh) {
  slab* raw = fresh.get();
  slabs_.push_back(std::move(fresh));
  slab_bytes_ += raw->bytes;
  class_state& state = classes_[raw->class_index];
  ++state.empty_slabs;
  ++state.slab_count;
  state.most_slabs = std::max(state.most_slabs, state.slab_count);
  link(state, raw);
}

std::unique_ptr<slab> stream_shard::remove_slab(slab* target) {
  auto at = std::find_if(slabs_.begin(), slabs_.end(), [&](const auto& owned) { return owned.get() == target; });
  assert(at != slabs_.end());
  std::unique_ptr<slab> removed = std::move(*at);
  *at = std::move(slabs_.back());
  slabs_.pop_back();
  slab_bytes_ -= removed->bytes;
  --classes_[removed->class_index].slab_count;
  return removed;
}

std::unique_ptr<slab> stream_shard::adopt_released(slab* released) { return remove_slab(released); }

std::vector<std::unique_ptr<slab>> stream_shard::take_empty_slabs() {
  std::vector<slab*> empty;
  for (const auto& owned : slabs_)
    if (owned->live == 0 && !owned->surplus) empty.push_back(owned.get());
  std::vector<std::unique_ptr<slab>> taken;
  taken.reserve(empty.size());
  for (slab* target : empty) {
    class_state& state = classes_[target->class_index];
    if (target->on_partial_list) unlink(state, target);
    --state.empty_slabs;
    taken.push_back(remove_slab(target));
  }
  return taken;
}

}  // namespace fragless::core
