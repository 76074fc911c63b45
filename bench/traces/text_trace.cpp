// text_trace: the text format, format detection and the file loader (see header).
#include "text_trace.hpp"

#include "csv_readers.hpp"
#include "snapshot_reader.hpp"
#include "text_fields.hpp"

#include <fstream>
#include <sstream>
#include <unordered_map>

namespace fragless::traces {

std::string write_text_trace(const trace& t) {
  std::string out;
  out.reserve(t.events.size() * 24 + 256);
  out += std::string(text_trace_magic) + " " + std::to_string(text_trace_version) + "\n";
  out += "name " + t.name + "\n";
  out += "source " + t.source_format + "\n";
  out += "streams " + std::to_string(t.stream_count) + "\n";
  for (const std::string& note : t.notes) out += "note " + note + "\n";
  out += "segments " + std::to_string(t.recorded_segment_allocs) + " " + std::to_string(t.recorded_segment_frees) + "\n";
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    const trace_event& e = t.events[i];
    if (e.op == trace_op::alloc) {
      out += i < t.seeded_block_count ? "s " : "a ";
      out += std::to_string(e.block_id) + " " + std::to_string(e.size_bytes) + " " + std::to_string(e.stream_index) + "\n";
    } else {
      out += "f " + std::to_string(e.block_id) + "\n";
    }
  }
  for (const recorded_point& p : t.recorded_reserved) {
    out += "r " + std::to_string(p.after_event) + " " + std::to_string(p.bytes) + "\n";
  }
  return out;
}

trace read_text_trace(std::string_view text, const std::string& name) {
  trace result;
  result.name = name;
  result.source_format = "fragless-text";
  line_reader lines(text);
  std::string_view line;
  if (!lines.next(line)) throw trace_error(name + ":1: empty file");
  {
    const auto fields = split_fields(line, ' ');
    if (fields.size() != 2 || fields[0] != text_trace_magic) {
      throw trace_error(name + ":1: not a fragless trace (first line must be '" + std::string(text_trace_magic) + " 1')");
    }
    const std::uint64_t version = parse_unsigned(fields[1], name + ":1: version");
    if (version != static_cast<std::uint64_t>(text_trace_version)) {
      throw trace_error(name + ":1: unsupported trace format version " + std::to_string(version));
    }
  }
  struct live_block {
    std::uint32_t stream;
    std::uint64_t size_bytes;
  };
  std::unordered_map<std::uint64_t, live_block> live;  // block id -> its allocation
  while (lines.next(line)) {
    const std::string where = name + ":" + std::to_string(lines.line_number());
    if (line.empty() || line.front() == '#') continue;
    const std::size_t space = line.find(' ');
    const std::string_view keyword = line.substr(0, space);
    const std::string_view rest = space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
    if (keyword == "name") { result.name = std::string(rest); continue; }
    if (keyword == "source") { result.source_format = std::string(rest); continue; }
    if (keyword == "note") { result.notes.emplace_back(rest); continue; }
    const auto fields = split_fields(rest, ' ');
    auto need = [&](std::size_t count) {
      if (fields.size() != count || (count > 0 && fields[0].empty())) {
        throw trace_error(where + ": '" + std::string(keyword) + "' takes " + std::to_string(count) + " fields");
      }
    };
    if (keyword == "streams") {
      need(1);
      const std::uint64_t streams = parse_unsigned(fields[0], where);
      if (streams == 0 || streams > 65536) throw trace_error(where + ": absurd stream count");
      result.stream_count = static_cast<std::uint32_t>(streams);
    } else if (keyword == "segments") {
      need(2);
      result.recorded_segment_allocs = parse_unsigned(fields[0], where);
      result.recorded_segment_frees = parse_unsigned(fields[1], where);
    } else if (keyword == "s" || keyword == "a") {
      need(3);
      if (keyword == "s" && result.events.size() != result.seeded_block_count) {
        throw trace_error(where + ": seed line after the first allocation or free");
      }
      const std::uint64_t id = parse_unsigned(fields[0], where + ": id");
      const std::uint64_t size = parse_unsigned(fields[1], where + ": size");
      const std::uint64_t stream = parse_unsigned(fields[2], where + ": stream");
      if (size == 0 || size > max_block_bytes) throw trace_error(where + ": absurd size " + std::to_string(size));
      if (stream >= result.stream_count) {
        throw trace_error(where + ": stream " + std::to_string(stream) + " not below 'streams' (" +
                          std::to_string(result.stream_count) + ")");
      }
      if (!live.emplace(id, live_block{static_cast<std::uint32_t>(stream), size}).second) {
        throw trace_error(where + ": block " + std::to_string(id) + " allocated twice");
      }
      result.events.push_back(trace_event{trace_op::alloc, static_cast<std::uint32_t>(stream), id, size});
      if (keyword == "s") result.seeded_block_count = result.events.size();
    } else if (keyword == "f") {
      need(1);
      const std::uint64_t id = parse_unsigned(fields[0], where + ": id");
      auto found = live.find(id);
      if (found == live.end()) throw trace_error(where + ": free of unknown block " + std::to_string(id));
      result.events.push_back(trace_event{trace_op::free, found->second.stream, id, found->second.size_bytes});
      live.erase(found);
    } else if (keyword == "r") {
      need(2);
      const std::uint64_t after = parse_unsigned(fields[0], where);
      const std::uint64_t bytes = parse_unsigned(fields[1], where);
      if (!result.recorded_reserved.empty() && after < result.recorded_reserved.back().after_event) {
        throw trace_error(where + ": recorded points must be in event order");
      }
      result.recorded_reserved.push_back(recorded_point{static_cast<std::size_t>(after), bytes});
    } else {
      throw trace_error(where + ": unknown line '" + std::string(keyword) + "'");
    }
  }
  try {
    validate_trace(result);
  } catch (const trace_error& e) {
    throw trace_error(name + ": " + e.what());
  }
  return result;
}

input_format detect_format(std::string_view bytes) {
  if (bytes.empty()) return input_format::unknown;
  if (static_cast<unsigned char>(bytes[0]) == 0x80) return input_format::pytorch_snapshot;
  if (bytes.substr(0, text_trace_magic.size()) == text_trace_magic) return input_format::fragless_text;
  const std::string_view header = bytes.substr(0, bytes.find('\n'));
  auto has = [&](std::string_view column) {
    for (std::string_view field : split_fields(header, ',')) {
      if (field == column) return true;
    }
    return false;
  };
  if (has("Action") && has("Pointer")) return input_format::rmm_csv;
  if (has("lower") && has("upper")) return input_format::lifetime_csv;
  return input_format::unknown;
}

std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw trace_error(path + ": cannot open file");
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) throw trace_error(path + ": read error");
  return std::move(contents).str();
}

trace load_trace_file(const std::string& path, const std::string& display_name) {
  const std::string bytes = read_file_bytes(path);
  if (bytes.empty()) throw trace_error(display_name + ": empty file");
  switch (detect_format(bytes)) {
    case input_format::pytorch_snapshot: return read_snapshot(bytes, display_name);
    case input_format::rmm_csv: return read_rmm_csv(bytes, display_name);
    case input_format::lifetime_csv: return read_lifetime_csv(bytes, display_name);
    case input_format::fragless_text: return read_text_trace(bytes, display_name);
    case input_format::unknown: break;
  }
  throw trace_error(display_name + ":1: unrecognised format (expected a PyTorch snapshot pickle, an RMM log CSV, "
                    "an id,lower,upper,size CSV or a fragless-trace file)");
}

}  // namespace fragless::traces
