// Tests of the data-only pickle reader: it reads what Python writes (protocols 2-5), refuses
// every opcode that imports or calls, and survives truncated and hostile input.
#include <catch2/catch.hpp>

#include "pickle_samples.hpp"
#include "pickle_reader.hpp"

#include <string>

using fragless::traces::pickle_error;
using fragless::traces::pickle_limits;
using fragless::traces::pickle_value;
using fragless::traces::read_pickle;

namespace {

std::string bytes(std::initializer_list<int> values) {
  std::string s;
  for (int v : values) s.push_back(static_cast<char>(v));
  return s;
}

// The error a pickle raises, or "" when it parses.
std::string error_of(std::string_view input, std::size_t* offset = nullptr) {
  try {
    (void)read_pickle(input);
  } catch (const pickle_error& e) {
    if (offset != nullptr) *offset = e.byte_offset();
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("pickle reader reads plain data written by every protocol from 2 to 5", "[bench][pickle]") {
  // Protocol 2 pickles bytes and sets through class references (refused), so those appear
  // from protocol 3 (bytes) and 4 (sets) on.
  const std::string_view samples[] = {pickle_samples::simple_protocol_2, pickle_samples::simple_protocol_3,
                                      pickle_samples::simple_protocol_4, pickle_samples::simple_protocol_5};
  for (int protocol = 2; protocol <= 5; ++protocol) {
    INFO("protocol " << protocol);
    const auto document = read_pickle(samples[protocol - 2]);
    const pickle_value& root = document.root();
    REQUIRE(root.is_dict());
    REQUIRE(root.find("a") != nullptr);
    CHECK(root.find("a")->int_value == 1);
    const auto& list = root.find("b")->items();
    REQUIRE(list.size() == 10);
    CHECK(list[0].int_value == 1);
    CHECK(list[1].float_value == 2.5);
    CHECK(list[2].text == "x");
    CHECK(list[3].is_none());
    CHECK(list[4].type == pickle_value::kind::boolean);
    CHECK(list[4].bool_value);
    CHECK(list[5].type == (protocol >= 3 ? pickle_value::kind::bytes : pickle_value::kind::string));
    CHECK(list[5].text == "by");
    CHECK(list[6].int_value == -7);
    CHECK(list[7].int_value == 300);
    CHECK(list[8].int_value == 70000);
    CHECK(list[9].int_value == -2147483648LL);
    CHECK(root.find("c")->type == pickle_value::kind::tuple);
    CHECK(root.find("c")->items().size() == 2);
    CHECK(root.find("big")->int_value == (std::int64_t{1} << 40));  // LONG1
    CHECK(root.find("neg")->int_value == -5);
    CHECK(root.find("huge")->type == pickle_value::kind::big_integer);  // 2**70 does not fit
    CHECK(root.find("f")->type == pickle_value::kind::boolean);
    CHECK_FALSE(root.find("f")->bool_value);
    if (protocol >= 4) {
      CHECK(root.find("s")->type == pickle_value::kind::set);
      CHECK(root.find("s")->items().at(0).int_value == 3);
      CHECK(root.find("fs")->items().size() == 1);
    }
    CHECK(root.find("missing") == nullptr);
  }
}

TEST_CASE("pickle reader resolves memo references", "[bench][pickle]") {
  const auto document = read_pickle(pickle_samples::memo_shared);
  const auto& items = document.root().items();
  REQUIRE(items.size() == 3);
  CHECK(items[0].text == "repeated-string");
  CHECK(items[1].text == "repeated-string");
  CHECK(items[2].items().at(0).text == "repeated-string");
}

TEST_CASE("pickle reader refuses every opcode that imports, calls or builds objects", "[bench][pickle]") {
  struct forbidden {
    const char* name;
    std::string input;
    std::size_t offset;
  };
  const std::vector<forbidden> cases = {
      {"GLOBAL", bytes({0x80, 2, 'c', 'o', 's', '\n', 's', 'y', 's', 't', 'e', 'm', '\n', '.'}), 2},
      {"STACK_GLOBAL", bytes({0x80, 4, 0x8c, 2, 'o', 's', 0x8c, 1, 's', 0x93, '.'}), 9},
      {"REDUCE", bytes({0x80, 2, 'N', ')', 'R', '.'}), 4},
      {"BUILD", bytes({0x80, 2, '}', '}', 'b', '.'}), 4},
      {"INST", bytes({'(', 'i', 'm', '\n', 'X', '\n', '.'}), 1},
      {"OBJ", bytes({'(', 'N', ')', 'o', '.'}), 3},
      {"NEWOBJ", bytes({0x80, 2, 'N', ')', 0x81, '.'}), 4},
      {"NEWOBJ_EX", bytes({0x80, 4, 'N', ')', '}', 0x92, '.'}), 5},
      {"EXT1", bytes({0x80, 2, 0x82, 1, '.'}), 2},
      {"EXT2", bytes({0x80, 2, 0x83, 1, 0, '.'}), 2},
      {"EXT4", bytes({0x80, 2, 0x84, 1, 0, 0, 0, '.'}), 2},
      {"PERSID", bytes({'P', 'i', 'd', '\n', '.'}), 0},
      {"BINPERSID", bytes({0x80, 2, 'N', 'Q', '.'}), 3},
      {"NEXT_BUFFER", bytes({0x80, 5, 0x97, '.'}), 2},
      {"READONLY_BUFFER", bytes({0x80, 5, 'N', 0x98, '.'}), 3},
  };
  for (const forbidden& c : cases) {
    INFO(c.name);
    std::size_t offset = 9999;
    const std::string message = error_of(c.input, &offset);
    CHECK(message.find(std::string("forbidden opcode ") + c.name + " ") != std::string::npos);
    CHECK(message.find("at byte " + std::to_string(c.offset)) != std::string::npos);
    CHECK(offset == c.offset);
  }
}

TEST_CASE("a real class reference (OrderedDict) is refused at its STACK_GLOBAL", "[bench][pickle]") {
  std::size_t offset = 0;
  const std::string message = error_of(pickle_samples::class_reference, &offset);
  CHECK(message.find("STACK_GLOBAL") != std::string::npos);
  CHECK(offset == 39);
}

TEST_CASE("every truncation of a valid pickle is an error, never a crash", "[bench][pickle]") {
  const std::string_view whole = pickle_samples::tiny_snapshot;
  REQUIRE(error_of(whole).empty());
  for (std::size_t length = 0; length < whole.size(); ++length) {
    INFO("length " << length);
    CHECK_FALSE(error_of(whole.substr(0, length)).empty());
  }
}

TEST_CASE("corrupt and hostile pickles are refused with a reason", "[bench][pickle]") {
  CHECK(error_of("").find("empty") != std::string::npos);
  CHECK(error_of(bytes({0x80, 9, 'N', '.'})).find("protocol 9") != std::string::npos);
  CHECK(error_of(bytes({0x80, 2, 0xff, '.'})).find("unknown") != std::string::npos);
  CHECK(error_of(bytes({0x80, 2, 'a', '.'})).find("underflow") != std::string::npos);
  CHECK(error_of(bytes({0x80, 2, 'h', 5, '.'})).find("memo key 5") != std::string::npos);
  CHECK(error_of(bytes({0x80, 2, 'N', 'N', '.'})).find("malformed stack") != std::string::npos);
  CHECK(error_of(bytes({0x80, 2, 'X', 0xff, 0xff, 0xff, 0x7f, 'a', '.'})).find("past the end") != std::string::npos);
  CHECK(error_of(bytes({0x80, 2, '}', 'N', 's', '.'})).find("underflow") != std::string::npos);
  CHECK(error_of(bytes({0x80, 2, 'N', 'N', 'a', '.'})).find("wrong type") != std::string::npos);
}

TEST_CASE("a list that contains itself through the memo is bounded data, not a hang", "[bench][pickle]") {
  // EMPTY_LIST, BINPUT 0, BINGET 0, APPEND, STOP: l = []; l.append(l)
  const auto document = read_pickle(bytes({0x80, 2, ']', 'q', 0, 'h', 0, 'a', '.'}));
  const auto& outer = document.root().items();
  REQUIRE(outer.size() == 1);
  CHECK(outer[0].container == document.root().container);
}

TEST_CASE("limits bound what a small input can make the reader allocate", "[bench][pickle]") {
  // A 1 KiB string fetched from the memo over and over.
  std::string input = bytes({0x80, 2, ']', 'X', 0, 4, 0, 0});
  input += std::string(1024, 'z');
  input += bytes({'q', 0, '0', '('});  // memoize, pop, mark
  for (int i = 0; i < 200; ++i) input += bytes({'h', 0});
  input += bytes({'e', '.'});
  pickle_limits limits;
  limits.max_text_bytes = 64 * 1024;
  std::string message;
  try {
    (void)read_pickle(input, limits);
  } catch (const pickle_error& e) {
    message = e.what();
  }
  CHECK(message.find("string bytes") != std::string::npos);
  pickle_limits few_values;
  few_values.max_values = 10;
  CHECK_THROWS_AS(read_pickle(input, few_values), pickle_error);
  CHECK_NOTHROW(read_pickle(input));  // within the default limits
}
