// Stats JSON: versioned schema, torch's key names, exact round trip, bad input rejected.
#include <catch2/catch.hpp>

#include <random>

#include "fragless/stats.hpp"
#include "json.hpp"

using namespace fragless;

TEST_CASE("to_json round-trips every stored value exactly") {
  std::mt19937_64 random(99);
  device_stats stats{};
  for (const stat_value& v : flatten(stats))
    set_flat_value(stats, v.key, static_cast<std::int64_t>(random() >> 1) * (random() % 2 ? 1 : -1));
  stats.allocated_bytes[pool_all].current = INT64_MAX;
  stats.reserved_bytes[pool_all].current = INT64_MIN;
  const std::string text = to_json(stats, 5);
  device_stats back{};
  int device = -1;
  std::string error;
  REQUIRE(stats_from_json(text, back, device, error));
  CHECK(device == 5);
  CHECK(back == stats);
}

TEST_CASE("JSON has the schema and torch's key names") {
  device_stats stats{};
  update(stats.allocated_bytes, pool_small, 4096);
  json::value root;
  std::string error;
  REQUIRE(json::parse(to_json(stats, 0), root, error));
  REQUIRE(root.find("schema") != nullptr);
  CHECK(root.find("schema")->as_string() == "fragless.stats/1");
  const json::value* values = root.find("stats");
  REQUIRE(values != nullptr);
  CHECK(values->find("allocated_bytes.all.current")->as_integer() == 4096);
  CHECK(values->find("allocated_bytes.small_pool.peak")->as_integer() == 4096);
  CHECK(values->find("allocated_bytes.large_pool.current")->as_integer() == 0);
  CHECK(values->find("fragmentation")->kind() == json::value::type::real);
  CHECK(values->members().size() == flatten(stats).size());
}

TEST_CASE("stats_from_json rejects other schemas and malformed text") {
  device_stats stats{};
  int device = 0;
  std::string error;
  CHECK_FALSE(stats_from_json(R"({"schema": "fragless.stats/2", "stats": {}})", stats, device, error));
  CHECK(error.find("schema") != std::string::npos);
  CHECK_FALSE(stats_from_json(R"({"schema": "fragless.stats/1"})", stats, device, error));
  CHECK_FALSE(stats_from_json(R"({"schema": "fragless.stats/1", "stats": {)", stats, device, error));
  CHECK(error.rfind("offset ", 0) == 0);
  // Unknown keys ignored, missing keys 0.
  REQUIRE(stats_from_json(R"({"schema": "fragless.stats/1", "stats": {"num_ooms": 4, "new_key": 1}})", stats, device,
                          error));
  CHECK(stats.num_ooms == 4);
  CHECK(stats.allocation[pool_all].current == 0);
}

TEST_CASE("json reader: escapes, numbers, depth, trailing garbage") {
  json::value v;
  std::string error;
  REQUIRE(json::parse(R"(["a\"b\\c\n\u00e9\ud83d\ude00", -0, 1.5e3, true, false, null, {}])", v, error));
  CHECK(v.items()[0].as_string() == "a\"b\\c\n\xc3\xa9\xf0\x9f\x98\x80");
  CHECK(v.items()[1].as_integer() == 0);
  CHECK(v.items()[2].as_real() == 1500.0);
  CHECK(v.items()[3].as_bool());
  CHECK(json::write(v, false) == R"(["a\"b\\c\n)" "\xc3\xa9\xf0\x9f\x98\x80" R"(",0,1500.0,true,false,null,{}])");
  for (const char* bad : {"", "[", "[1,]", "{\"a\" 1}", "01", "1 2", "\"\\x\"", "\"\\ud800\"", "tru", "-", "1.",
                          "[1e]", "\"a\x01\""}) {
    INFO(bad);
    CHECK_FALSE(json::parse(bad, v, error));
  }
  CHECK_FALSE(json::parse(std::string(10000, '['), v, error));
  CHECK(error.find("deep") != std::string::npos);
}
