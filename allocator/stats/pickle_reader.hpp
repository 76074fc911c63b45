// pickle_reader: a data-only reader for Python pickles (protocols 2 to 5).
//
// Invariant: nothing in the input can make this reader import, construct or call anything.
// It understands only opcodes that build plain data (None, bools, ints, floats, strings,
// bytes, lists, tuples, dicts, sets, the memo and framing); every opcode that would import a
// global, call a callable, build an object or load a persistent id is refused with a
// pickle_error naming the opcode and its byte offset. Memory use is linear in the input
// size (each opcode creates at most one value; lengths are checked against the bytes left),
// and the reader itself never recurses. See Note [Pickle safety].
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fragless::traces {

// Note [Pickle safety]
// Python's pickle is a small stack machine whose opcodes include GLOBAL / STACK_GLOBAL
// (import any name), REDUCE / NEWOBJ / INST / OBJ / BUILD (call it), EXT* (registry
// imports) and PERSID (hand an id to the loader). A memory snapshot never needs those:
// torch.cuda.memory._dump_snapshot() writes plain dicts and lists. We therefore accept a
// white list of data opcodes and reject everything else, including opcodes we do not know.
// Containers live in an arena owned by the pickle_document, so a hostile memo reference
// that makes a list contain itself cannot leak; consumers walk values with a depth limit.

class pickle_error : public std::runtime_error {
public:
  pickle_error(const std::string& message, std::size_t byte_offset)
      : std::runtime_error(message), byte_offset_(byte_offset) {}
  std::size_t byte_offset() const noexcept { return byte_offset_; }

private:
  std::size_t byte_offset_;
};

struct pickle_container;

// One pickled value. Scalars are held inline; containers point into the document's arena.
struct pickle_value {
  enum class kind : std::uint8_t {
    none, boolean, integer, big_integer, floating, string, bytes, list, tuple, dict, set
  };
  kind type = kind::none;
  bool bool_value = false;
  std::int64_t int_value = 0;      // integer
  double float_value = 0.0;        // floating
  std::string text;                // string (UTF-8), bytes, big_integer (two's complement, little endian)
  pickle_container* container = nullptr;  // list, tuple, dict, set

  bool is_none() const noexcept { return type == kind::none; }
  bool is_int() const noexcept { return type == kind::integer || type == kind::boolean; }
  bool is_string() const noexcept { return type == kind::string; }
  bool is_sequence() const noexcept { return type == kind::list || type == kind::tuple; }
  bool is_dict() const noexcept { return type == kind::dict; }

  // Dict lookup by string key; nullptr when absent or when this is not a dict.
  const pickle_value* find(std::string_view key) const noexcept;
  // Items of a list/tuple/set (empty for anything else).
  const std::vector<pickle_value>& items() const noexcept;
  // Entries of a dict (empty for anything else).
  const std::vector<std::pair<pickle_value, pickle_value>>& entries() const noexcept;
};

struct pickle_container {
  std::vector<pickle_value> items;                                // list, tuple, set
  std::vector<std::pair<pickle_value, pickle_value>> entries;     // dict, insertion order
};

struct pickle_limits {
  std::size_t max_input_bytes = std::size_t{1} << 32;   // 4 GiB
  std::size_t max_values = std::size_t{1} << 28;        // values created while reading
  std::size_t max_stack_depth = std::size_t{1} << 24;   // values on the machine's stack
  std::size_t max_text_bytes = std::size_t{1} << 30;    // string bytes, counting memo copies
};

// A parsed pickle: the root value plus the arena that owns every container.
class pickle_document {
public:
  const pickle_value& root() const noexcept { return root_; }

private:
  friend class pickle_machine;
  pickle_value root_;
  std::vector<std::unique_ptr<pickle_container>> arena_;
};

// Parses `bytes` (a whole pickle). Throws pickle_error on any malformed, truncated or
// forbidden input; the message names the opcode (when there is one) and the byte offset.
pickle_document read_pickle(std::string_view bytes, const pickle_limits& limits = {});

// The name of a pickle opcode byte ("GLOBAL", "BININT1", ...), or "unknown".
std::string_view pickle_opcode_name(std::uint8_t opcode) noexcept;

}  // namespace fragless::traces
