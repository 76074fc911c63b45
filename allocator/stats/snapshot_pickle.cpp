// The PyTorch-compatible snapshot pickle, Note [Snapshot pickle] in
// fragless/stats_snapshot.hpp. Invariant: only data opcodes of protocol 2 are written
// (no GLOBAL/REDUCE), so safe data-only readers and pickle.load both accept it.
#include <cstdint>
#include <string>

#include "fragless/stats_snapshot.hpp"

namespace fragless {
namespace {

// Pickle opcodes used (protocol 2).
constexpr char op_proto = '\x80';
constexpr char op_stop = '.';
constexpr char op_mark = '(';
constexpr char op_empty_dict = '}';
constexpr char op_empty_list = ']';
constexpr char op_setitems = 'u';
constexpr char op_appends = 'e';
constexpr char op_binint = 'J';
constexpr char op_long1 = '\x8a';
constexpr char op_binunicode = 'X';
constexpr char op_true = '\x88';
constexpr char op_false = '\x89';
constexpr char op_tuple2 = '\x86';

class pickle_writer {
 public:
  pickle_writer() {
    out_ += op_proto;
    out_ += '\x02';
  }
  std::string finish() {
    out_ += op_stop;
    return std::move(out_);
  }

  void integer(std::int64_t value) {
    if (value >= INT32_MIN && value <= INT32_MAX) {
      out_ += op_binint;
      append_little_endian(static_cast<std::uint64_t>(value), 4);
      return;
    }
    // LONG1: minimal two's-complement little-endian bytes.
    std::string bytes;
    std::int64_t rest = value;
    while (true) {
      const auto byte = static_cast<unsigned char>(rest & 0xff);
      bytes += static_cast<char>(byte);
      rest >>= 8;  // arithmetic shift keeps the sign
      const bool sign_bit = (byte & 0x80) != 0;
      if ((rest == 0 && !sign_bit) || (rest == -1 && sign_bit)) break;
    }
    out_ += op_long1;
    out_ += static_cast<char>(bytes.size());
    out_ += bytes;
  }
  void unsigned_integer(std::uint64_t value) {
    if (value <= static_cast<std::uint64_t>(INT64_MAX)) {
      integer(static_cast<std::int64_t>(value));
      return;
    }
    std::string bytes;
    for (int i = 0; i < 8; ++i) bytes += static_cast<char>((value >> (8 * i)) & 0xff);
    bytes += '\0';  // positive: a zero sign byte
    out_ += op_long1;
    out_ += static_cast<char>(bytes.size());
    out_ += bytes;
  }
  void text(std::string_view value) {
    out_ += op_binunicode;
    append_little_endian(value.size(), 4);
    out_ += value;
  }
  void boolean(bool value) { out_ += value ? op_true : op_false; }
  void empty_list() { out_ += op_empty_list; }
  void empty_dict() { out_ += op_empty_dict; }
  void mark() { out_ += op_mark; }
  void setitems() { out_ += op_setitems; }
  void appends() { out_ += op_appends; }
  void tuple2() { out_ += op_tuple2; }

 private:
  void append_little_endian(std::uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) out_ += static_cast<char>((value >> (8 * i)) & 0xff);
  }
  std::string out_;
};

void write_block(pickle_writer& w, const snapshot_block& block) {
  w.empty_dict();
  w.mark();
  w.text("address");
  w.unsigned_integer(block.address);
  w.text("size");
  w.unsigned_integer(block.size_bytes);
  w.text("requested_size");
  w.unsigned_integer(block.requested_bytes);
  w.text("state");
  w.text(to_pytorch_state(block.state));
  w.text("frames");
  w.empty_list();
  w.setitems();
}

void write_segment(pickle_writer& w, const snapshot_segment& segment) {
  std::uint64_t allocated = 0, active = 0, requested = 0;
  for (const snapshot_block& block : segment.blocks) {
    if (block.state == block_state::allocated) {
      allocated += block.size_bytes;
      requested += block.requested_bytes;
    }
    if (block.state != block_state::free) active += block.size_bytes;
  }
  w.empty_dict();
  w.mark();
  w.text("device");
  w.integer(segment.device);
  w.text("address");
  w.unsigned_integer(segment.address);
  w.text("total_size");
  w.unsigned_integer(segment.size_bytes);
  w.text("allocated_size");
  w.unsigned_integer(allocated);
  w.text("active_size");
  w.unsigned_integer(active);
  w.text("requested_size");
  w.unsigned_integer(requested);
  w.text("stream");
  w.unsigned_integer(segment.stream);
  w.text("segment_type");
  w.text(segment.pool == pool_small ? "small" : "large");
  w.text("segment_pool_id");  // (0, fragless pool id); (0, 0): the device's own cache
  w.integer(0);
  w.integer(static_cast<std::int64_t>(segment.private_pool));
  w.tuple2();
  w.text("is_expandable");
  w.boolean(segment.is_expandable);
  w.text("frames");
  w.empty_list();
  w.text("blocks");
  w.empty_list();
  if (!segment.blocks.empty()) {
    w.mark();
    for (const snapshot_block& block : segment.blocks) write_block(w, block);
    w.appends();
  }
  w.setitems();
}

}  // namespace

std::string to_pytorch_pickle(const memory_snapshot& snapshot) {
  pickle_writer w;
  w.empty_dict();
  w.mark();
  w.text("segments");
  w.empty_list();
  if (!snapshot.segments.empty()) {
    w.mark();
    for (const snapshot_segment& segment : snapshot.segments) write_segment(w, segment);
    w.appends();
  }
  w.text("device_traces");
  w.empty_list();
  if (snapshot.device_count > 0) {
    w.mark();
    for (int device = 0; device < snapshot.device_count; ++device) w.empty_list();
    w.appends();
  }
  w.text("allocator_settings");
  w.empty_dict();
  w.mark();
  w.text("backend");
  w.text("fragless");
  w.text("settings");
  w.text(snapshot.settings);
  w.text("max_split_size");
  w.integer(snapshot.max_split_size);
  w.setitems();
  w.setitems();
  return w.finish();
}

}  // namespace fragless
