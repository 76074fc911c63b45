// pickle_reader: the data-only pickle machine. See Note [Pickle safety] in the header.
// Invariant: every read is bounds-checked against the input, every value counted against
// the limits, and only white-listed opcodes execute.
#include "pickle_reader.hpp"

#include <bit>
#include <cstring>
#include <unordered_map>

namespace fragless::traces {

namespace {

const std::vector<pickle_value> empty_items;
const std::vector<std::pair<pickle_value, pickle_value>> empty_entries;

struct opcode_name {
  std::uint8_t code;
  const char* name;
};

constexpr opcode_name opcode_names[] = {
    {'(', "MARK"}, {'.', "STOP"}, {'0', "POP"}, {'1', "POP_MARK"}, {'2', "DUP"},
    {'F', "FLOAT"}, {'I', "INT"}, {'J', "BININT"}, {'K', "BININT1"}, {'L', "LONG"},
    {'M', "BININT2"}, {'N', "NONE"}, {'P', "PERSID"}, {'Q', "BINPERSID"}, {'R', "REDUCE"},
    {'S', "STRING"}, {'T', "BINSTRING"}, {'U', "SHORT_BINSTRING"}, {'V', "UNICODE"},
    {'X', "BINUNICODE"}, {'a', "APPEND"}, {'b', "BUILD"}, {'c', "GLOBAL"}, {'d', "DICT"},
    {'}', "EMPTY_DICT"}, {'e', "APPENDS"}, {'g', "GET"}, {'h', "BINGET"}, {'i', "INST"},
    {'j', "LONG_BINGET"}, {'l', "LIST"}, {']', "EMPTY_LIST"}, {'o', "OBJ"}, {'p', "PUT"},
    {'q', "BINPUT"}, {'r', "LONG_BINPUT"}, {'s', "SETITEM"}, {'t', "TUPLE"},
    {')', "EMPTY_TUPLE"}, {'u', "SETITEMS"}, {'G', "BINFLOAT"}, {0x80, "PROTO"},
    {0x81, "NEWOBJ"}, {0x82, "EXT1"}, {0x83, "EXT2"}, {0x84, "EXT4"}, {0x85, "TUPLE1"},
    {0x86, "TUPLE2"}, {0x87, "TUPLE3"}, {0x88, "NEWTRUE"}, {0x89, "NEWFALSE"},
    {0x8a, "LONG1"}, {0x8b, "LONG4"}, {'B', "BINBYTES"}, {'C', "SHORT_BINBYTES"},
    {0x8c, "SHORT_BINUNICODE"}, {0x8d, "BINUNICODE8"}, {0x8e, "BINBYTES8"},
    {0x8f, "EMPTY_SET"}, {0x90, "ADDITEMS"}, {0x91, "FROZENSET"}, {0x92, "NEWOBJ_EX"},
    {0x93, "STACK_GLOBAL"}, {0x94, "MEMOIZE"}, {0x95, "FRAME"}, {0x96, "BYTEARRAY8"},
    {0x97, "NEXT_BUFFER"}, {0x98, "READONLY_BUFFER"},
};

bool is_forbidden(std::uint8_t op) {
  switch (op) {
    case 'c': case 0x93: case 'R': case 'b': case 'i': case 'o': case 0x81: case 0x92:
    case 0x82: case 0x83: case 0x84: case 'P': case 'Q': case 0x97: case 0x98:
      return true;
    default:
      return false;
  }
}

std::string hex_byte(std::uint8_t b) {
  static const char digits[] = "0123456789abcdef";
  std::string s = "0x";
  s += digits[b >> 4];
  s += digits[b & 15];
  return s;
}

}  // namespace

std::string_view pickle_opcode_name(std::uint8_t opcode) noexcept {
  for (const auto& entry : opcode_names) {
    if (entry.code == opcode) return entry.name;
  }
  return "unknown";
}

const pickle_value* pickle_value::find(std::string_view key) const noexcept {
  if (type != kind::dict || container == nullptr) return nullptr;
  for (const auto& [k, v] : container->entries) {
    if (k.type == kind::string && k.text == key) return &v;
  }
  return nullptr;
}

const std::vector<pickle_value>& pickle_value::items() const noexcept {
  if ((type == kind::list || type == kind::tuple || type == kind::set) && container != nullptr) {
    return container->items;
  }
  return empty_items;
}

const std::vector<std::pair<pickle_value, pickle_value>>& pickle_value::entries() const noexcept {
  if (type == kind::dict && container != nullptr) return container->entries;
  return empty_entries;
}

// The stack machine. One instance per read; not reentrant.
class pickle_machine {
public:
  pickle_machine(std::string_view input, const pickle_limits& limits, pickle_document& document)
      : input_(input), limits_(limits), document_(document) {}

  void run() {
    if (input_.size() > limits_.max_input_bytes) fail("input larger than the limit", 0);
    if (input_.empty()) fail("empty input (not a pickle)", 0);
    for (;;) {
      if (position_ >= input_.size()) fail("truncated pickle: no STOP opcode", position_);
      opcode_offset_ = position_;
      const std::uint8_t op = next_byte();
      if (is_forbidden(op)) {
        fail("forbidden opcode " + std::string(pickle_opcode_name(op)) + " (" + hex_byte(op) +
                 ") at byte " + std::to_string(opcode_offset_) +
                 ": pickles that import or call code are refused",
             opcode_offset_);
      }
      if (op == '.') {
        if (stack_.size() != 1 || !marks_.empty()) fail_here("STOP with a malformed stack");
        document_.root_ = std::move(stack_.back());
        return;
      }
      execute(op);
    }
  }

private:
  [[noreturn]] void fail(const std::string& message, std::size_t offset) {
    throw pickle_error(message, offset);
  }
  [[noreturn]] void fail_here(const std::string& message) {
    const std::uint8_t op = static_cast<std::uint8_t>(input_[opcode_offset_]);
    fail(message + " (opcode " + std::string(pickle_opcode_name(op)) + " at byte " +
             std::to_string(opcode_offset_) + ")",
         opcode_offset_);
  }

  std::uint8_t next_byte() {
    if (position_ >= input_.size()) fail_here("truncated pickle");
    return static_cast<std::uint8_t>(input_[position_++]);
  }
  std::string_view take(std::uint64_t count) {
    if (count > input_.size() - position_) fail_here("truncated pickle: length runs past the end");
    std::string_view bytes = input_.substr(position_, static_cast<std::size_t>(count));
    position_ += static_cast<std::size_t>(count);
    return bytes;
  }
  std::uint64_t read_unsigned_le(unsigned count) {
    std::string_view bytes = take(count);
    std::uint64_t value = 0;
    for (unsigned i = 0; i < count; ++i) {
      value |= std::uint64_t{static_cast<std::uint8_t>(bytes[i])} << (8 * i);
    }
    return value;
  }
  std::string_view read_line() {
    const std::size_t end = input_.find('\n', position_);
    if (end == std::string_view::npos) fail_here("truncated pickle: missing newline");
    std::string_view line = input_.substr(position_, end - position_);
    position_ = end + 1;
    return line;
  }

  void count_value() {
    if (++values_created_ > limits_.max_values) fail_here("too many values (limit)");
  }
  // Strings are copied by GET/DUP/PUT, so their total is bounded separately.
  void count_text(std::size_t bytes) {
    text_bytes_ += bytes;
    if (text_bytes_ > limits_.max_text_bytes) fail_here("too many string bytes (limit)");
  }
  void push(pickle_value value) {
    if (stack_.size() >= limits_.max_stack_depth) fail_here("stack deeper than the limit");
    stack_.push_back(std::move(value));
  }
  pickle_value pop() {
    if (stack_.size() <= floor()) fail_here("stack underflow");
    pickle_value value = std::move(stack_.back());
    stack_.pop_back();
    return value;
  }
  std::size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  pickle_value& top() {
    if (stack_.size() <= floor()) fail_here("stack underflow");
    return stack_.back();
  }
  // Pops everything down to the last MARK and removes the mark.
  std::vector<pickle_value> pop_to_mark() {
    if (marks_.empty()) fail_here("no MARK on the stack");
    const std::size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<pickle_value> items(std::make_move_iterator(stack_.begin() + static_cast<std::ptrdiff_t>(mark)),
                                    std::make_move_iterator(stack_.end()));
    stack_.resize(mark);
    return items;
  }

  pickle_value make_container(pickle_value::kind kind) {
    count_value();
    document_.arena_.push_back(std::make_unique<pickle_container>());
    pickle_value value;
    value.type = kind;
    value.container = document_.arena_.back().get();
    return value;
  }
  pickle_value make_int(std::int64_t v) {
    count_value();
    pickle_value value;
    value.type = pickle_value::kind::integer;
    value.int_value = v;
    return value;
  }
  pickle_value make_text(pickle_value::kind kind, std::string_view bytes) {
    count_value();
    count_text(bytes.size());
    pickle_value value;
    value.type = kind;
    value.text.assign(bytes);
    return value;
  }
  pickle_value make_long(std::string_view bytes) {
    if (bytes.size() <= 8) {
      std::uint64_t raw = 0;
      for (std::size_t i = 0; i < bytes.size(); ++i) {
        raw |= std::uint64_t{static_cast<std::uint8_t>(bytes[i])} << (8 * i);
      }
      if (!bytes.empty() && bytes.size() < 8 && (static_cast<std::uint8_t>(bytes.back()) & 0x80) != 0) {
        raw |= ~std::uint64_t{0} << (8 * bytes.size());  // sign-extend
      }
      return make_int(std::bit_cast<std::int64_t>(raw));
    }
    return make_text(pickle_value::kind::big_integer, bytes);
  }

  pickle_container& target_container(pickle_value& value, pickle_value::kind expected) {
    if (value.type != expected || value.container == nullptr) fail_here("operand has the wrong type");
    return *value.container;
  }
  void add_entries(pickle_container& dict, std::vector<pickle_value>& items) {
    if (items.size() % 2 != 0) fail_here("odd number of items for a dict");
    for (std::size_t i = 0; i < items.size(); i += 2) {
      dict.entries.emplace_back(std::move(items[i]), std::move(items[i + 1]));
    }
  }
  void memo_put(std::uint64_t index) {
    count_text(top().text.size());
    if (memo_.size() >= limits_.max_values) fail_here("memo larger than the limit");
    memo_[index] = top();
  }
  void memo_get(std::uint64_t index) {
    auto found = memo_.find(index);
    if (found == memo_.end()) fail_here("memo key " + std::to_string(index) + " not defined");
    count_value();
    count_text(found->second.text.size());
    push(found->second);
  }
  std::int64_t parse_decimal(std::string_view line) {
    std::int64_t value = 0;
    bool negative = false;
    std::size_t i = 0;
    if (i < line.size() && (line[i] == '-' || line[i] == '+')) negative = line[i++] == '-';
    if (i >= line.size()) fail_here("malformed decimal");
    for (; i < line.size(); ++i) {
      if (line[i] == 'L' && i + 1 == line.size()) break;
      if (line[i] < '0' || line[i] > '9') fail_here("malformed decimal");
      if (value > (INT64_MAX - 9) / 10) fail_here("decimal too large");
      value = value * 10 + (line[i] - '0');
    }
    return negative ? -value : value;
  }

  void execute(std::uint8_t op) {
    using kind = pickle_value::kind;
    switch (op) {
      case 0x80: {  // PROTO
        const std::uint8_t protocol = next_byte();
        if (protocol > 5) fail_here("unsupported pickle protocol " + std::to_string(protocol));
        break;
      }
      case 0x95: {  // FRAME: a length hint; the frame's bytes follow inline.
        const std::uint64_t frame_bytes = read_unsigned_le(8);
        if (frame_bytes > input_.size() - position_) fail_here("frame runs past the end");
        break;
      }
      case '(': marks_.push_back(stack_.size()); break;
      case '0': pop(); break;
      case '1': pop_to_mark(); break;
      case '2': {
        pickle_value copy = top();
        count_value();
        count_text(copy.text.size());
        push(std::move(copy));
        break;
      }
      case 'N': count_value(); push(pickle_value{}); break;
      case 0x88: case 0x89: {
        count_value();
        pickle_value value;
        value.type = kind::boolean;
        value.bool_value = op == 0x88;
        value.int_value = op == 0x88 ? 1 : 0;
        push(std::move(value));
        break;
      }
      case 'J': push(make_int(static_cast<std::int32_t>(static_cast<std::uint32_t>(read_unsigned_le(4))))); break;
      case 'K': push(make_int(static_cast<std::int64_t>(read_unsigned_le(1)))); break;
      case 'M': push(make_int(static_cast<std::int64_t>(read_unsigned_le(2)))); break;
      case 'I': {
        std::string_view line = read_line();
        if (line == "01" || line == "00") {
          count_value();
          pickle_value value;
          value.type = kind::boolean;
          value.bool_value = line == "01";
          value.int_value = value.bool_value ? 1 : 0;
          push(std::move(value));
        } else {
          push(make_int(parse_decimal(line)));
        }
        break;
      }
      case 'L': push(make_int(parse_decimal(read_line()))); break;
      case 0x8a: push(make_long(take(read_unsigned_le(1)))); break;
      case 0x8b: {
        const std::uint64_t length = read_unsigned_le(4);
        push(make_long(take(length)));
        break;
      }
      case 'G': {
        const std::uint64_t raw = read_unsigned_le(8);
        count_value();
        pickle_value value;
        value.type = kind::floating;
        value.float_value = std::bit_cast<double>(__builtin_bswap64(raw));  // big endian on the wire
        push(std::move(value));
        break;
      }
      case 'X': push(make_text(kind::string, take(read_unsigned_le(4)))); break;
      case 0x8c: push(make_text(kind::string, take(read_unsigned_le(1)))); break;
      case 0x8d: push(make_text(kind::string, take(read_unsigned_le(8)))); break;
      case 'T': push(make_text(kind::bytes, take(read_unsigned_le(4)))); break;
      case 'U': push(make_text(kind::bytes, take(read_unsigned_le(1)))); break;
      case 'B': push(make_text(kind::bytes, take(read_unsigned_le(4)))); break;
      case 'C': push(make_text(kind::bytes, take(read_unsigned_le(1)))); break;
      case 0x8e: case 0x96: push(make_text(kind::bytes, take(read_unsigned_le(8)))); break;
      case ']': push(make_container(kind::list)); break;
      case ')': push(make_container(kind::tuple)); break;
      case '}': push(make_container(kind::dict)); break;
      case 0x8f: push(make_container(kind::set)); break;
      case 'l': case 't': case 0x91: {
        std::vector<pickle_value> items = pop_to_mark();
        pickle_value value = make_container(op == 'l' ? kind::list : op == 't' ? kind::tuple : kind::set);
        value.container->items = std::move(items);
        push(std::move(value));
        break;
      }
      case 0x85: case 0x86: case 0x87: {
        const std::size_t count = op == 0x85 ? 1u : op == 0x86 ? 2u : 3u;
        if (stack_.size() < floor() + count) fail_here("stack underflow");
        pickle_value value = make_container(kind::tuple);
        value.container->items.assign(std::make_move_iterator(stack_.end() - static_cast<std::ptrdiff_t>(count)),
                                      std::make_move_iterator(stack_.end()));
        stack_.resize(stack_.size() - count);
        push(std::move(value));
        break;
      }
      case 'd': {
        std::vector<pickle_value> items = pop_to_mark();
        pickle_value value = make_container(kind::dict);
        add_entries(*value.container, items);
        push(std::move(value));
        break;
      }
      case 'a': {
        pickle_value item = pop();
        target_container(top(), kind::list).items.push_back(std::move(item));
        break;
      }
      case 'e': {
        std::vector<pickle_value> items = pop_to_mark();
        auto& list = target_container(top(), kind::list).items;
        for (auto& item : items) list.push_back(std::move(item));
        break;
      }
      case 0x90: {
        std::vector<pickle_value> items = pop_to_mark();
        auto& set = target_container(top(), kind::set).items;
        for (auto& item : items) set.push_back(std::move(item));
        break;
      }
      case 's': {
        pickle_value value = pop();
        pickle_value key = pop();
        target_container(top(), kind::dict).entries.emplace_back(std::move(key), std::move(value));
        break;
      }
      case 'u': {
        std::vector<pickle_value> items = pop_to_mark();
        add_entries(target_container(top(), kind::dict), items);
        break;
      }
      case 'p': memo_put(static_cast<std::uint64_t>(parse_decimal(read_line()))); break;
      case 'q': memo_put(read_unsigned_le(1)); break;
      case 'r': memo_put(read_unsigned_le(4)); break;
      case 0x94: memo_put(memo_.size()); break;
      case 'g': memo_get(static_cast<std::uint64_t>(parse_decimal(read_line()))); break;
      case 'h': memo_get(read_unsigned_le(1)); break;
      case 'j': memo_get(read_unsigned_le(4)); break;
      default:
        fail("unknown or unsupported opcode " + hex_byte(op) + " (" +
                 std::string(pickle_opcode_name(op)) + ") at byte " + std::to_string(opcode_offset_),
             opcode_offset_);
    }
  }

  std::string_view input_;
  const pickle_limits& limits_;
  pickle_document& document_;
  std::size_t position_ = 0;
  std::size_t opcode_offset_ = 0;
  std::size_t values_created_ = 0;
  std::size_t text_bytes_ = 0;
  std::vector<pickle_value> stack_;
  std::vector<std::size_t> marks_;
  std::unordered_map<std::uint64_t, pickle_value> memo_;
};

pickle_document read_pickle(std::string_view bytes, const pickle_limits& limits) {
  pickle_document document;
  pickle_machine machine(bytes, limits, document);
  machine.run();
  return document;
}

}  // namespace fragless::traces
