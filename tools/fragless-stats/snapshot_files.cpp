// Snapshot files to memory_snapshot; see snapshot_files.hpp. PyTorch's snapshot keys are
// mapped as: total_size -> size, segment_type -> pool, state active_allocated /
// active_pending_free / inactive -> allocated / pending_free / free. Blocks without an
// "address" (older PyTorch) are placed one after another from the segment's address.
#include "snapshot_files.hpp"

#include <algorithm>

#include "cli_support.hpp"

#include "pickle_reader.hpp"

namespace fragless::cli {

namespace {

using traces::pickle_value;

// A non-negative integer (int or big_integer of up to 8 magnitude bytes).
bool to_unsigned(const pickle_value* value, std::uint64_t& out) {
  if (value == nullptr) return false;
  if (value->type == pickle_value::kind::integer) {
    if (value->int_value < 0) return false;
    out = static_cast<std::uint64_t>(value->int_value);
    return true;
  }
  if (value->type == pickle_value::kind::big_integer) {
    const std::string& bytes = value->text;  // two's complement, little endian
    if (bytes.empty() || (static_cast<unsigned char>(bytes.back()) & 0x80) != 0) return false;
    for (std::size_t i = 8; i < bytes.size(); ++i)
      if (bytes[i] != 0) return false;
    std::uint64_t result = 0;
    for (std::size_t i = 0; i < std::min<std::size_t>(8, bytes.size()); ++i)
      result |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
    out = result;
    return true;
  }
  return false;
}

bool convert_segment(const pickle_value& in, snapshot_segment& segment, std::string& error) {
  if (!in.is_dict()) {
    error = "segment is not a dict";
    return false;
  }
  std::uint64_t device = 0;
  if (in.find("device") != nullptr && !to_unsigned(in.find("device"), device)) {
    error = "bad segment device";
    return false;
  }
  segment.device = static_cast<int>(std::min<std::uint64_t>(device, 1u << 20));
  if (!to_unsigned(in.find("address"), segment.address) || !to_unsigned(in.find("total_size"), segment.size_bytes)) {
    error = "segment without address/total_size";
    return false;
  }
  std::uint64_t stream = 0;
  if (to_unsigned(in.find("stream"), stream)) segment.stream = stream;
  const pickle_value* type = in.find("segment_type");
  segment.pool = type != nullptr && type->is_string() && type->text == "small" ? pool_small : pool_large;
  const pickle_value* expandable = in.find("is_expandable");
  segment.is_expandable = expandable != nullptr && expandable->type == pickle_value::kind::boolean && expandable->bool_value;
  const pickle_value* blocks = in.find("blocks");
  if (blocks == nullptr || !blocks->is_sequence()) {
    error = "segment without a blocks list";
    return false;
  }
  std::uint64_t next_address = segment.address;
  for (const pickle_value& b : blocks->items()) {
    if (!b.is_dict()) {
      error = "block is not a dict";
      return false;
    }
    snapshot_block block;
    if (!to_unsigned(b.find("size"), block.size_bytes)) {
      error = "block without size";
      return false;
    }
    if (!to_unsigned(b.find("address"), block.address)) block.address = next_address;
    to_unsigned(b.find("requested_size"), block.requested_bytes);
    const pickle_value* state = b.find("state");
    const std::string state_text = state != nullptr && state->is_string() ? state->text : "";
    if (state_text == "active_allocated") block.state = block_state::allocated;
    else if (state_text == "active_pending_free") block.state = block_state::pending_free;
    else if (state_text == "inactive") block.state = block_state::free;
    else {
      error = "block with unknown state \"" + state_text.substr(0, 40) + "\"";
      return false;
    }
    if (block.state == block_state::free) block.requested_bytes = 0;
    next_address = block.address + block.size_bytes;
    segment.blocks.push_back(block);
  }
  return true;
}

bool convert_pickle(const std::string& bytes, memory_snapshot& snapshot, std::string& error) {
  try {
    const traces::pickle_document document = traces::read_pickle(bytes);
    const pickle_value& root = document.root();
    const pickle_value* segments = nullptr;
    if (root.is_dict()) segments = root.find("segments");
    else if (root.is_sequence()) segments = &root;  // torch.cuda.memory_snapshot(): the list alone
    if (segments == nullptr || !segments->is_sequence()) {
      error = "not a PyTorch memory snapshot (no \"segments\" list)";
      return false;
    }
    memory_snapshot parsed;
    int max_device = 0;
    for (const pickle_value& item : segments->items()) {
      snapshot_segment segment;
      if (!convert_segment(item, segment, error)) {
        error = "segment " + std::to_string(parsed.segments.size()) + ": " + error;
        return false;
      }
      max_device = std::max(max_device, segment.device);
      parsed.segments.push_back(std::move(segment));
    }
    parsed.device_count = max_device + 1;
    if (root.is_dict()) {
      const pickle_value* device_traces = root.find("device_traces");
      if (device_traces != nullptr && device_traces->is_sequence())
        parsed.device_count = std::max(parsed.device_count, static_cast<int>(std::min<std::size_t>(device_traces->items().size(), 4096)));
      const pickle_value* settings = root.find("allocator_settings");
      if (settings != nullptr && settings->is_dict()) {
        const pickle_value* split = settings->find("max_split_size");
        if (split != nullptr && split->type == pickle_value::kind::integer) parsed.max_split_size = split->int_value;
      }
    }
    snapshot = std::move(parsed);
    return true;
  } catch (const traces::pickle_error& e) {
    error = std::string("bad pickle: ") + e.what();
    return false;
  } catch (const std::exception& e) {
    error = std::string("cannot read pickle: ") + e.what();
    return false;
  }
}

}  // namespace

bool load_snapshot_bytes(const std::string& bytes, const std::string& name, memory_snapshot& snapshot,
                         std::string& format, std::string& error) {
  const std::size_t first = bytes.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && bytes[first] == '{') {
    format = "fragless JSON";
    if (!snapshot_from_json(bytes, snapshot, error)) {
      error = name + ": " + error;
      return false;
    }
    return true;
  }
  if (!bytes.empty() && static_cast<unsigned char>(bytes[0]) == 0x80) {
    format = "PyTorch pickle";
    if (!convert_pickle(bytes, snapshot, error)) {
      error = name + ": " + error;
      return false;
    }
    return true;
  }
  error = name + ": neither a fragless JSON snapshot nor a PyTorch snapshot pickle";
  return false;
}

bool load_snapshot_file(const std::string& path, memory_snapshot& snapshot, std::string& format, std::string& error) {
  std::string bytes;
  if (!read_file(path, bytes, error)) return false;
  return load_snapshot_bytes(bytes, path, snapshot, format, error);
}

}  // namespace fragless::cli
