// snapshot_reader: snapshot pickle -> trace (Note [Snapshot replay] in the header).
// Invariant: every structural assumption about the snapshot is checked, with a message
// naming where in the document it failed.
#include "snapshot_reader.hpp"

#include "trace_builder.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace fragless::traces {

namespace {

std::uint64_t as_u64(const pickle_value* v, const std::string& where, const char* field) {
  if (v == nullptr || !v->is_int()) throw trace_error(where + ": field '" + field + "' missing or not an integer");
  if (v->int_value < 0) throw trace_error(where + ": field '" + field + "' is negative");
  return static_cast<std::uint64_t>(v->int_value);
}

std::string as_string(const pickle_value* v) {
  return (v != nullptr && v->is_string()) ? v->text : std::string();
}

bool is_free_action(const std::string& action) {
  return action == "free_requested" || action == "free_completed" || action == "free";
}

struct device_event {
  std::string action;
  std::uint64_t address = 0;
  std::uint64_t size_bytes = 0;
  std::uint64_t stream = 0;
  std::int64_t time_us = -1;  // the event's timestamp, -1 when the snapshot has none
};

}  // namespace

trace read_snapshot(std::string_view bytes, const std::string& name, snapshot_facts* facts_out) {
  pickle_document document;
  try {
    document = read_pickle(bytes);
  } catch (const pickle_error& e) {
    throw pickle_error(name + ": " + e.what(), e.byte_offset());
  }
  const pickle_value& root = document.root();
  if (!root.is_dict()) throw trace_error(name + ": top level is not a dict (not a memory snapshot)");
  const pickle_value* segments = root.find("segments");
  const pickle_value* device_traces = root.find("device_traces");
  if (segments == nullptr || !segments->is_sequence()) throw trace_error(name + ": no 'segments' list");
  if (device_traces != nullptr && !device_traces->is_sequence()) throw trace_error(name + ": 'device_traces' is not a list");

  snapshot_facts facts;
  // Pick the device with the most allocations.
  std::size_t best_allocs = 0;
  const auto& devices = device_traces != nullptr ? device_traces->items() : std::vector<pickle_value>{};
  for (std::size_t d = 0; d < devices.size(); ++d) {
    std::size_t allocs = 0;
    for (const pickle_value& e : devices[d].items()) {
      if (as_string(e.find("action")) == "alloc") ++allocs;
    }
    if (allocs > best_allocs) {
      best_allocs = allocs;
      facts.device = static_cast<int>(d);
    }
  }

  trace result;
  result.name = name;
  result.source_format = "pytorch-snapshot";
  trace_builder builder(result);

  // Decode the chosen device's events.
  std::vector<device_event> events;
  bool has_free_completed = false;
  for (std::size_t d = 0; d < devices.size(); ++d) {
    const auto& list = devices[d].items();
    if (static_cast<int>(d) != facts.device) {
      facts.other_device_events += list.size();
      continue;
    }
    events.reserve(list.size());
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string where = name + ": device_traces[" + std::to_string(d) + "][" + std::to_string(i) + "]";
      const pickle_value& e = list[i];
      if (!e.is_dict()) throw trace_error(where + ": event is not a dict");
      device_event ev;
      ev.action = as_string(e.find("action"));
      if (ev.action.empty()) throw trace_error(where + ": event without an action");
      if (ev.action == "snapshot" || ev.action == "oom") {
        events.push_back(ev);
        continue;
      }
      ev.address = as_u64(e.find("addr"), where, "addr");
      ev.size_bytes = as_u64(e.find("size"), where, "size");
      const pickle_value* stream = e.find("stream");
      ev.stream = (stream != nullptr && stream->is_int()) ? static_cast<std::uint64_t>(stream->int_value) : 0;
      const pickle_value* time = e.find("time_us");
      if (time != nullptr && time->is_int() && time->int_value >= 0) ev.time_us = time->int_value;
      if (ev.action == "free_completed") has_free_completed = true;
      events.push_back(std::move(ev));
    }
  }
  auto frees_block = [&](const std::string& action) {
    return has_free_completed ? action == "free_completed" : (action == "free_requested" || action == "free");
  };

  // Live blocks in `segments` at dump time (on the replayed device).
  struct dump_block {
    std::uint64_t size_bytes;
    std::uint64_t stream;
  };
  std::map<std::uint64_t, dump_block> dump_live;
  const auto& segment_list = segments->items();
  for (std::size_t s = 0; s < segment_list.size(); ++s) {
    const std::string where = name + ": segments[" + std::to_string(s) + "]";
    const pickle_value& segment = segment_list[s];
    if (!segment.is_dict()) throw trace_error(where + ": segment is not a dict");
    const pickle_value* device = segment.find("device");
    const int segment_device = (device != nullptr && device->is_int()) ? static_cast<int>(device->int_value) : 0;
    if (segment_device != facts.device) continue;
    std::uint64_t block_address = as_u64(segment.find("address"), where, "address");
    facts.dump_reserved_bytes += as_u64(segment.find("total_size"), where, "total_size");
    const pickle_value* stream = segment.find("stream");
    const std::uint64_t segment_stream = (stream != nullptr && stream->is_int()) ? static_cast<std::uint64_t>(stream->int_value) : 0;
    const auto& blocks = segment.find("blocks") != nullptr ? segment.find("blocks")->items() : std::vector<pickle_value>{};
    for (std::size_t b = 0; b < blocks.size(); ++b) {
      const std::string block_where = where + ".blocks[" + std::to_string(b) + "]";
      const pickle_value& block = blocks[b];
      const std::uint64_t size = as_u64(block.find("size"), block_where, "size");
      // Older snapshots omit block addresses: blocks tile their segment in order.
      if (const pickle_value* address = block.find("address"); address != nullptr) {
        block_address = as_u64(address, block_where, "address");
      }
      const std::string state = as_string(block.find("state"));
      if (state == "active_allocated" || state == "active_pending_free") {
        const pickle_value* requested = block.find("requested_size");
        const std::uint64_t requested_bytes = requested != nullptr ? as_u64(requested, block_where, "requested_size") : size;
        dump_live[block_address] = dump_block{requested_bytes, segment_stream};
        facts.dump_live_bytes += requested_bytes;
      }
      block_address += size;
    }
  }

  // Seeds, rule 1: the first event at an address is a free.
  std::map<std::uint64_t, dump_block> seeds;
  {
    std::unordered_set<std::uint64_t> seen;
    std::unordered_map<std::uint64_t, std::uint64_t> live_at_end;  // trace allocations live at the end
    for (const device_event& ev : events) {
      const bool is_alloc = ev.action == "alloc";
      const bool is_free = is_free_action(ev.action);
      if (!is_alloc && !is_free) continue;
      if (seen.insert(ev.address).second && is_free) seeds[ev.address] = dump_block{ev.size_bytes, ev.stream};
      if (is_alloc) live_at_end[ev.address] = ev.size_bytes;
      if (is_free && frees_block(ev.action)) live_at_end.erase(ev.address);
    }
    // Rule 2: active at dump time and not explained by a live trace allocation.
    for (const auto& [address, block] : dump_live) {
      if (live_at_end.count(address) == 0 && seeds.count(address) == 0) seeds[address] = block;
    }
  }
  for (const auto& [address, block] : seeds) {
    builder.seed(address, block.size_bytes, block.stream, name + ": seed at segments/trace");
    facts.seed_bytes += block.size_bytes;
  }

  // Replay events, and the recorded reserved curve backwards from the dump total.
  std::vector<std::int64_t> reserved_delta_at(events.size(), 0);
  std::vector<std::size_t> replay_index_after(events.size(), 0);
  for (std::size_t i = 0; i < events.size(); ++i) {
    const device_event& ev = events[i];
    const std::string where = name + ": device_traces[" + std::to_string(facts.device) + "][" + std::to_string(i) + "]";
    if (ev.action == "alloc") {
      builder.alloc(ev.address, ev.size_bytes, ev.stream, where);
    } else if (frees_block(ev.action)) {
      builder.free(ev.address, where);
    } else if (ev.action == "segment_alloc" || ev.action == "segment_map") {
      reserved_delta_at[i] = static_cast<std::int64_t>(ev.size_bytes);
      ++result.recorded_segment_allocs;
    } else if (ev.action == "segment_free" || ev.action == "segment_unmap") {
      reserved_delta_at[i] = -static_cast<std::int64_t>(ev.size_bytes);
      ++result.recorded_segment_frees;
    }
    replay_index_after[i] = result.events.size();  // events replayed up to and including i
  }
  // Note [Cost model]: the window's recorded wall time, when events carry timestamps.
  std::int64_t first_us = -1, last_us = -1;
  for (const device_event& ev : events) {
    if (ev.time_us < 0) continue;
    if (first_us < 0 || ev.time_us < first_us) first_us = ev.time_us;
    last_us = std::max(last_us, ev.time_us);
  }
  if (first_us >= 0 && last_us > first_us) result.recorded_wall_ns = static_cast<std::uint64_t>(last_us - first_us) * 1000;
  facts.replay_end_live_bytes = builder.live_bytes();
  facts.seeding_consistent = facts.replay_end_live_bytes == facts.dump_live_bytes;

  // Reserved after each device event, walking backwards from the dump total.
  std::vector<std::int64_t> reserved_after(events.size(), 0);
  std::int64_t reserved = static_cast<std::int64_t>(facts.dump_reserved_bytes);
  for (std::size_t i = events.size(); i-- > 0;) {
    reserved_after[i] = reserved;
    reserved -= reserved_delta_at[i];
  }
  if (reserved < 0) {
    result.notes.push_back("recorded segment events exceed the dump total; native-as-recorded curve clamped");
    reserved = 0;
  }
  auto clamp = [](std::int64_t v) { return static_cast<std::uint64_t>(std::max<std::int64_t>(v, 0)); };
  if (!result.events.empty()) {
    const std::size_t start_index = result.seeded_block_count == 0 ? 0 : result.seeded_block_count - 1;
    result.recorded_reserved.push_back(recorded_point{start_index, clamp(reserved)});
    for (std::size_t i = 0; i < events.size(); ++i) {
      if (reserved_delta_at[i] == 0) continue;
      const std::size_t after = replay_index_after[i] == 0 ? 0 : replay_index_after[i] - 1;
      if (!result.recorded_reserved.empty() && result.recorded_reserved.back().after_event == after) {
        result.recorded_reserved.back().bytes = clamp(reserved_after[i]);
      } else {
        result.recorded_reserved.push_back(recorded_point{after, clamp(reserved_after[i])});
      }
    }
  }

  if (facts.other_device_events != 0) {
    result.notes.push_back(std::to_string(facts.other_device_events) + " events on other devices not replayed");
  }
  if (!facts.seeding_consistent) {
    result.notes.push_back("seeding check failed: replay ends with " + std::to_string(facts.replay_end_live_bytes) +
                           " live bytes, segments say " + std::to_string(facts.dump_live_bytes));
  }
  if (!has_free_completed && !events.empty()) {
    result.notes.push_back("no free_completed events: blocks freed at free_requested");
  }
  validate_trace(result);
  if (facts_out != nullptr) *facts_out = facts;
  return result;
}

}  // namespace fragless::traces
