// Snapshot JSON, Note [Snapshot JSON] in fragless/stats_snapshot.hpp. Invariant: reading
// what to_json wrote gives back an equal memory_snapshot.
#include <algorithm>
#include <string>

#include "fragless/stats_snapshot.hpp"
#include "json.hpp"

namespace fragless {
namespace {

std::string_view state_name(block_state state) {
  switch (state) {
    case block_state::allocated: return "allocated";
    case block_state::pending_free: return "pending_free";
    case block_state::free: break;
  }
  return "free";
}

json::value integer(std::uint64_t number) { return json::value::make_integer(static_cast<std::int64_t>(number)); }

bool read_unsigned(const json::value& object, std::string_view key, std::uint64_t& out, std::string& error) {
  const json::value* member = object.find(key);
  if (member == nullptr || member->kind() != json::value::type::integer || member->as_integer() < 0) {
    error = "missing or bad \"" + std::string(key) + "\" (a non-negative integer)";
    return false;
  }
  out = static_cast<std::uint64_t>(member->as_integer());
  return true;
}

}  // namespace

std::string to_json(const memory_snapshot& snapshot) {
  json::value root = json::value::make_object();
  root.set("schema", json::value::make_string(std::string(snapshot_json_schema)));
  root.set("device_count", json::value::make_integer(snapshot.device_count));
  root.set("max_split_size", json::value::make_integer(snapshot.max_split_size));
  root.set("settings", json::value::make_string(snapshot.settings));
  json::value segments = json::value::make_array();
  for (const snapshot_segment& segment : snapshot.segments) {
    json::value out = json::value::make_object();
    out.set("device", json::value::make_integer(segment.device));
    out.set("address", integer(segment.address));
    out.set("size", integer(segment.size_bytes));
    out.set("stream", integer(segment.stream));
    out.set("pool", json::value::make_string(segment.pool == pool_small ? "small" : "large"));
    out.set("expandable", json::value::make_bool(segment.is_expandable));
    if (segment.private_pool != 0) out.set("private_pool", integer(segment.private_pool));
    json::value blocks = json::value::make_array();
    for (const snapshot_block& block : segment.blocks) {
      json::value b = json::value::make_object();
      b.set("address", integer(block.address));
      b.set("size", integer(block.size_bytes));
      b.set("requested_size", integer(block.requested_bytes));
      b.set("state", json::value::make_string(std::string(state_name(block.state))));
      blocks.push(std::move(b));
    }
    out.set("blocks", std::move(blocks));
    segments.push(std::move(out));
  }
  root.set("segments", std::move(segments));
  return json::write(root);
}

bool snapshot_from_json(std::string_view text, memory_snapshot& snapshot, std::string& error) {
  json::value root;
  if (!json::parse(text, root, error)) return false;
  const json::value* schema = root.find("schema");
  if (schema == nullptr || schema->kind() != json::value::type::string || schema->as_string() != snapshot_json_schema) {
    error = "not a fragless snapshot (expected \"schema\": \"" + std::string(snapshot_json_schema) + "\")";
    return false;
  }
  memory_snapshot parsed;
  if (const json::value* count = root.find("device_count")) parsed.device_count = static_cast<int>(count->as_integer());
  if (parsed.device_count < 1 || parsed.device_count > 4096) {
    error = "bad device_count";
    return false;
  }
  if (const json::value* split = root.find("max_split_size")) parsed.max_split_size = split->as_integer();
  if (const json::value* settings = root.find("settings"); settings && settings->kind() == json::value::type::string)
    parsed.settings = settings->as_string();
  const json::value* segments = root.find("segments");
  if (segments == nullptr || segments->kind() != json::value::type::array) {
    error = "missing \"segments\" array";
    return false;
  }
  std::size_t index = 0;
  for (const json::value& in : segments->items()) {
    const std::string where = "segment " + std::to_string(index++) + ": ";
    if (in.kind() != json::value::type::object) {
      error = where + "not an object";
      return false;
    }
    snapshot_segment segment;
    std::uint64_t device = 0;
    if (!read_unsigned(in, "device", device, error) || !read_unsigned(in, "address", segment.address, error) ||
        !read_unsigned(in, "size", segment.size_bytes, error)) {
      error = where + error;
      return false;
    }
    segment.device = static_cast<int>(std::min<std::uint64_t>(device, 1u << 30));
    if (in.find("stream") != nullptr && !read_unsigned(in, "stream", segment.stream, error)) {
      error = where + error;
      return false;
    }
    if (in.find("private_pool") != nullptr && !read_unsigned(in, "private_pool", segment.private_pool, error))
      return false;
    const json::value* pool = in.find("pool");
    if (pool == nullptr || pool->kind() != json::value::type::string ||
        (pool->as_string() != "small" && pool->as_string() != "large")) {
      error = where + "\"pool\" must be \"small\" or \"large\"";
      return false;
    }
    segment.pool = pool->as_string() == "small" ? pool_small : pool_large;
    if (const json::value* expandable = in.find("expandable"))
      segment.is_expandable = expandable->kind() == json::value::type::boolean && expandable->as_bool();
    const json::value* blocks = in.find("blocks");
    if (blocks == nullptr || blocks->kind() != json::value::type::array) {
      error = where + "missing \"blocks\" array";
      return false;
    }
    for (const json::value& b : blocks->items()) {
      snapshot_block block;
      if (b.kind() != json::value::type::object || !read_unsigned(b, "address", block.address, error) ||
          !read_unsigned(b, "size", block.size_bytes, error)) {
        error = where + "block: " + (b.kind() == json::value::type::object ? error : std::string("not an object"));
        return false;
      }
      if (b.find("requested_size") != nullptr && !read_unsigned(b, "requested_size", block.requested_bytes, error)) {
        error = where + "block: " + error;
        return false;
      }
      const json::value* state = b.find("state");
      const std::string state_text = state != nullptr && state->kind() == json::value::type::string ? state->as_string() : "";
      if (state_text == "allocated") block.state = block_state::allocated;
      else if (state_text == "pending_free") block.state = block_state::pending_free;
      else if (state_text == "free") block.state = block_state::free;
      else {
        error = where + "block \"state\" must be allocated, pending_free or free";
        return false;
      }
      segment.blocks.push_back(block);
    }
    parsed.segments.push_back(std::move(segment));
  }
  snapshot = std::move(parsed);
  return true;
}

}  // namespace fragless
