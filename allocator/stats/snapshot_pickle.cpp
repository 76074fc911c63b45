// The PyTorch-compatible snapshot pickle, Note [Snapshot pickle] in
// fragless/stats_snapshot.hpp. Invariant: only data opcodes of protocol 2 are written
// (no GLOBAL/REDUCE), so safe data-only readers and pickle.load both accept it.
#include <cstdint>
#include <string>
#include <string_view>

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

  // A dict whose items `write_items` writes as key, value, key, value...
  template <typename WriteItems>
  void dict(WriteItems&& write_items) {
    empty_dict();
    mark();
    write_items();
    setitems();
  }
  // A list of `count` items, item i written by `write_item(i)`.
  template <typename WriteItem>
  void list(std::size_t count, WriteItem&& write_item) {
    empty_list();
    if (count == 0) return;
    mark();
    for (std::size_t i = 0; i < count; ++i) write_item(i);
    appends();
  }
  void unsigned_item(std::string_view key, std::uint64_t value) {
    text(key);
    unsigned_integer(value);
  }
  void text_item(std::string_view key, std::string_view value) {
    text(key);
    text(value);
  }

 private:
  void append_little_endian(std::uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) out_ += static_cast<char>((value >> (8 * i)) & 0xff);
  }
  std::string out_;
};

void write_block(pickle_writer& w, const snapshot_block& block) {
  w.dict([&] {
    w.unsigned_item("address", block.address);
    w.unsigned_item("size", block.size_bytes);
    w.unsigned_item("requested_size", block.requested_bytes);
    w.text_item("state", to_pytorch_state(block.state));
    w.text("frames");
    w.empty_list();
  });
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
  w.dict([&] {
    w.text("device");
    w.integer(segment.device);
    w.unsigned_item("address", segment.address);
    w.unsigned_item("total_size", segment.size_bytes);
    w.unsigned_item("allocated_size", allocated);
    w.unsigned_item("active_size", active);
    w.unsigned_item("requested_size", requested);
    w.unsigned_item("stream", segment.stream);
    w.text_item("segment_type", segment.pool == pool_small ? "small" : "large");
    w.text("segment_pool_id");  // (0, fragless pool id); (0, 0): the device's own cache
    w.integer(0);
    w.integer(static_cast<std::int64_t>(segment.private_pool));
    w.tuple2();
    w.text("is_expandable");
    w.boolean(segment.is_expandable);
    w.text("frames");
    w.empty_list();
    w.text("blocks");
    w.list(segment.blocks.size(), [&](std::size_t i) { write_block(w, segment.blocks[i]); });
  });
}

}  // namespace

std::string to_pytorch_pickle(const memory_snapshot& snapshot) {
  pickle_writer w;
  w.dict([&] {
    w.text("segments");
    w.list(snapshot.segments.size(), [&](std::size_t i) { write_segment(w, snapshot.segments[i]); });
    w.text("device_traces");
    w.list(snapshot.device_count > 0 ? static_cast<std::size_t>(snapshot.device_count) : 0,
           [&](std::size_t) { w.empty_list(); });
    w.text("allocator_settings");
    w.dict([&] {
      w.text_item("backend", "fragless");
      w.text_item("settings", snapshot.settings);
      w.text("max_split_size");
      w.integer(snapshot.max_split_size);
    });
  });
  return w.finish();
}

}  // namespace fragless
