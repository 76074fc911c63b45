// fragless-stats against a process holding known allocations in the real allocator on
// simcuda: the CLI reports exactly what the allocator reports, the requested bytes and
// allocation count it must, and the snapshot it takes is consistent with those stats.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "fragless/stats_snapshot.hpp"
#include "json.hpp"
#include "process_runner.hpp"
#include "runtime_directory.hpp"

using namespace fragless;

TEST_CASE("the CLI reports the allocator's numbers for a process with known allocations") {
  const testing::runtime_directory runtime;
  const std::string& root = runtime.root;
  ::setenv("FRAGLESS_CONF", "publish_stats:False", 1);  // the fixture publishes itself
  testing::child_process fixture({FRAGLESS_ALLOCATOR_FIXTURE_EXE});
  std::istringstream head(fixture.read_line());
  std::string word;
  std::int64_t requested = 0, live = 0;
  head >> word >> requested >> live;
  REQUIRE(word == "requested");
  const std::string own_json = fixture.read_line();
  REQUIRE(fixture.read_line() == "ready");
  device_stats own{};
  int device = -1;
  std::string error;
  REQUIRE(stats_from_json(own_json, own, device, error));

  // What the allocator must report for these allocations, whatever its rounding.
  CHECK(own.requested_bytes[pool_all].current == requested);
  CHECK(own.allocation[pool_all].current == live);
  CHECK(own.allocated_bytes[pool_all].current >= requested);

  const auto shown = testing::run({FRAGLESS_STATS_EXE, std::to_string(fixture.pid()), "--json"});
  REQUIRE(shown.exit_code == 0);
  json::value root_json;
  REQUIRE(json::parse(shown.out, root_json, error));
  const auto& devices = root_json.find("devices")->items();
  REQUIRE(devices.size() == 1);
  device_stats reported{};
  for (const auto& [key, value] : devices[0].find("stats")->members())
    if (value.kind() == json::value::type::integer) set_flat_value(reported, key, value.as_integer());
  CHECK(reported == own);

  const std::string path = root + "/snap.json";
  const auto taken = testing::run({FRAGLESS_STATS_EXE, "snapshot", std::to_string(fixture.pid()), "-o", path});
  INFO(taken.err);
  REQUIRE(taken.exit_code == 0);
  memory_snapshot snap;
  std::string text;
  {
    std::ifstream in(path);
    std::stringstream buffer;
    buffer << in.rdbuf();
    text = buffer.str();
  }
  REQUIRE(snapshot_from_json(text, snap, error));
  CHECK(check_snapshot(snap).empty());
  const auto differences = compare_current(stats_from_snapshot(snap, 0), own, false);
  for (const auto& d : differences) INFO(d);
  CHECK(differences.empty());

  CHECK(fixture.finish() == 0);
  ::unsetenv("FRAGLESS_CONF");
}

// Note [Consistent snapshots]: a process whose four threads keep allocating small and large
// blocks gives whole snapshots, none retried (before slabs were read from themselves, 4 of
// 5 were torn; before Note [Frees in flight], large blocks between the free index and the
// live-block map tore some).
TEST_CASE("snapshots of a busy four-thread process are consistent") {
  const testing::runtime_directory runtime;
  const std::string& root = runtime.root;
  ::setenv("FRAGLESS_CONF", "publish_stats:False", 1);
  testing::child_process fixture({FRAGLESS_ALLOCATOR_FIXTURE_EXE, "--busy"});
  fixture.read_line();
  fixture.read_line();
  REQUIRE(fixture.read_line() == "ready");
  int retried = 0;
  for (int i = 0; i < 5; ++i) {
    const std::string path = root + "/busy" + std::to_string(i) + ".json";
    const auto taken = testing::run({FRAGLESS_STATS_EXE, "snapshot", std::to_string(fixture.pid()), "-o", path});
    INFO(taken.err);
    REQUIRE(taken.exit_code == 0);
    CHECK(taken.err.find("still inconsistent") == std::string::npos);
    retried += taken.err.find("retried") != std::string::npos;
    std::ifstream in(path);
    std::stringstream buffer;
    buffer << in.rdbuf();
    memory_snapshot snap;
    std::string error;
    REQUIRE(snapshot_from_json(buffer.str(), snap, error));
    const auto problems = check_snapshot(snap);
    for (const auto& p : problems) INFO(p);
    CHECK(problems.empty());
  }
  CHECK(retried == 0);
  CHECK(fixture.finish() == 0);
  ::unsetenv("FRAGLESS_CONF");
}
