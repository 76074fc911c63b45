// fragless-stats against a fixture process that publishes known stats: the list, the PID
// summary (text, JSON, CSV, watch), snapshots (JSON and pickle), show and map, and every
// error path's one-line message and exit code.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_support.hpp"
#include "fragless/options.hpp"
#include "json.hpp"
#include "process_runner.hpp"
#include "publisher_fixture.hpp"
#include "runtime_directory.hpp"
#include "stats_directory.hpp"
#include "stats_page.hpp"

#ifdef FRAGLESS_HAVE_EXPAT
#include <expat.h>
#endif

using namespace fragless;
using fragless::testing::child_process;
using fragless::testing::run;
namespace fs = std::filesystem;

namespace {

// A private XDG_RUNTIME_DIR, and no colour in the CLI's output.
struct environment : fragless::testing::runtime_directory {
  environment() { ::setenv("NO_COLOR", "1", 1); }
};

struct fixture_process {
  child_process child;
  explicit fixture_process(std::vector<std::string> extra = {})
      : child([&] {
          std::vector<std::string> argv{FRAGLESS_FIXTURE_EXE};
          argv.insert(argv.end(), extra.begin(), extra.end());
          return argv;
        }()) {
    REQUIRE(child.read_line() == "ready");
  }
  std::string pid() const { return std::to_string(child.pid()); }
};

testing::run_result run_cli(std::vector<std::string> args) {
  args.insert(args.begin(), FRAGLESS_STATS_EXE);
  return run(args);
}

std::size_t count_lines_starting(const std::string& text, std::string_view prefix) {
  std::size_t count = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) count += line.rfind(prefix, 0) == 0;
  return count;
}

void check_device_json(const json::value& device) {
  const int index = static_cast<int>(device.find("device")->as_integer());
  const device_stats expected = fixture::known_stats(index);
  const json::value* stats = device.find("stats");
  REQUIRE(stats != nullptr);
  std::size_t compared = 0;
  for (const stat_value& v : flatten(expected)) {
    INFO(v.key);
    const json::value* got = stats->find(v.key);
    REQUIRE(got != nullptr);
    if (v.is_integer) CHECK(got->as_integer() == v.integer);
    else CHECK(got->as_real() == Approx(v.real));
    ++compared;
  }
  CHECK(compared == stats->members().size());
}

// A copy of the fixture's page as another process's: `pid`, `pid_namespace` and, if given,
// `command` patched in (what a process in a container sharing the directory writes).
void write_page_copy(const environment& env, const fixture_process& fixture, std::int64_t pid,
                     std::uint64_t pid_namespace, const std::string& command = {}) {
  const std::string path = env.stats_dir() + "/" + std::to_string(pid) + ".stats";
  fs::copy_file(env.stats_dir() + "/" + fixture.pid() + ".stats", path, fs::copy_options::overwrite_existing);
  ::chmod(path.c_str(), 0600);
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(offsetof(stats_page::header, pid));
  f.write(reinterpret_cast<const char*>(&pid), sizeof pid);
  f.seekp(offsetof(stats_page::header, pid_namespace));
  f.write(reinterpret_cast<const char*>(&pid_namespace), sizeof pid_namespace);
  if (!command.empty()) {
    char field[stats_page::command_bytes] = {};
    command.copy(field, sizeof field - 1);
    f.seekp(offsetof(stats_page::header, command));
    f.write(field, sizeof field);
  }
}

}  // namespace

TEST_CASE("list shows the fixture with its devices and exact numbers") {
  environment env;
  fixture_process fixture;
  const auto text = run_cli({"--no-color"});
  REQUIRE(text.exit_code == 0);
  INFO(text.out);
  CHECK(count_lines_starting(text.out, fixture.pid() + " ") == 2);
  CHECK(text.out.find("stats_publisher") != std::string::npos);
  for (int device : fixture::devices) {
    const device_stats s = fixture::known_stats(device);
    CHECK(text.out.find(format_bytes_readable(static_cast<double>(s.allocated_bytes[pool_all].current))) != std::string::npos);
    CHECK(text.out.find(format_bytes_readable(static_cast<double>(s.reserved_bytes[pool_all].current))) != std::string::npos);
  }

  const auto as_json = run_cli({"list", "--json"});
  REQUIRE(as_json.exit_code == 0);
  json::value root;
  std::string error;
  REQUIRE(json::parse(as_json.out, root, error));
  CHECK(root.find("schema")->as_string() == "fragless.process_list/1");
  const auto& processes = root.find("processes")->items();
  REQUIRE(processes.size() == 1);
  CHECK(processes[0].find("pid")->as_integer() == fixture.child.pid());
  const auto& devices = processes[0].find("devices")->items();
  REQUIRE(devices.size() == 2);
  for (const auto& device : devices) check_device_json(device);
}

TEST_CASE("PID view: text equals memory_summary, JSON and CSV carry every field exactly") {
  environment env;
  fixture_process fixture;
  const auto text = run_cli({fixture.pid(), "--no-color"});
  REQUIRE(text.exit_code == 0);
  for (int device : fixture::devices)
    CHECK(text.out.find(memory_summary(fixture::known_stats(device), device)) != std::string::npos);

  const auto as_json = run_cli({fixture.pid(), "--json"});
  REQUIRE(as_json.exit_code == 0);
  json::value root;
  std::string error;
  REQUIRE(json::parse(as_json.out, root, error));
  CHECK(root.find("schema")->as_string() == "fragless.process_stats/1");
  REQUIRE(root.find("devices")->items().size() == 2);
  for (const auto& device : root.find("devices")->items()) check_device_json(device);

  const auto as_csv = run_cli({fixture.pid(), "--csv"});
  REQUIRE(as_csv.exit_code == 0);
  std::istringstream lines(as_csv.out);
  std::string header, row;
  std::getline(lines, header);
  std::vector<std::string> columns;
  for (std::stringstream h(header); std::getline(h, row, ',');) columns.push_back(row);
  CHECK(columns.size() == 4 + flatten(device_stats{}).size());
  int rows = 0;
  while (std::getline(lines, row)) {
    std::vector<std::string> cells;
    for (std::stringstream r(row); std::getline(r, header, ',');) cells.push_back(header);
    REQUIRE(cells.size() == columns.size());
    const int device = std::stoi(cells[2]);
    const device_stats expected = fixture::known_stats(device);
    CHECK(cells[0] == fixture.pid());
    for (std::size_t c = 4; c < columns.size(); ++c) {
      INFO(columns[c]);
      CHECK(std::stod(cells[c]) == Approx(*flat_value(expected, columns[c])).epsilon(1e-6));
    }
    ++rows;
  }
  CHECK(rows == 2);
}

TEST_CASE("watch mode redraws a bounded number of times") {
  environment env;
  fixture_process fixture;
  const auto text = run_cli({fixture.pid(), "--watch", "0.1", "--count", "3", "--no-color"});
  REQUIRE(text.exit_code == 0);
  CHECK(count_lines_starting(text.out, "Every 0.10s: fragless-stats " + fixture.pid()) == 3);
  CHECK(count_lines_starting(text.out, "|                  fragless CUDA memory summary") == 6);
  CHECK(text.out.find("\033[") == std::string::npos);

  const auto lines = run_cli({fixture.pid(), "--json", "--watch", "0.05", "--count", "4"});
  REQUIRE(lines.exit_code == 0);
  CHECK(count_lines_starting(lines.out, "{\"schema\":\"fragless.process_stats/1\"") == 4);

  const auto csv = run_cli({fixture.pid(), "--csv", "--watch", "0.05", "--count", "2"});
  CHECK(count_lines_starting(csv.out, "pid,command,device") == 1);
  CHECK(count_lines_starting(csv.out, fixture.pid() + ",") == 4);
}

TEST_CASE("snapshot, show and map") {
  environment env;
  fixture_process fixture;
  const std::string json_path = env.root + "/snap.json";
  const auto taken = run_cli({"snapshot", fixture.pid(), "-o", json_path});
  INFO(taken.err);
  REQUIRE(taken.exit_code == 0);
  std::string content, error;
  REQUIRE(cli::read_file(json_path, content, error));
  memory_snapshot back;
  REQUIRE(snapshot_from_json(content, back, error));
  CHECK(back == fixture::known_snapshot());

  const auto shown = run_cli({"show", json_path, "--no-color"});
  REQUIRE(shown.exit_code == 0);
  CHECK(shown.out.find(memory_summary(stats_from_snapshot(fixture::known_snapshot(), 0), 0)) != std::string::npos);
  CHECK(shown.out.find(memory_summary(stats_from_snapshot(fixture::known_snapshot(), 2), 2)) != std::string::npos);
  CHECK(count_lines_starting(shown.out, "dev ") == fixture::known_snapshot().segments.size());
  CHECK(shown.out.find("inconsistent") == std::string::npos);
  // The 20 MiB segment: 8 allocated, 4 pending, 8 free over 64 cells.
  CHECK(shown.out.find("|" + std::string(26, '#') + std::string(13, '+') + std::string(25, '.') + "|") !=
        std::string::npos);

  const std::string pickle_path = env.root + "/snap.pickle";
  REQUIRE(run_cli({"snapshot", fixture.pid(), "-o", pickle_path}).exit_code == 0);
  const auto shown_pickle = run_cli({"show", pickle_path, "--no-color"});
  REQUIRE(shown_pickle.exit_code == 0);
  CHECK(shown_pickle.out.find("(PyTorch pickle)") != std::string::npos);
  CHECK(shown_pickle.out.find(memory_summary(stats_from_snapshot(fixture::known_snapshot(), 0), 0)) !=
        std::string::npos);

  const std::string svg_path = env.root + "/map.svg";
  REQUIRE(run_cli({"map", json_path, "-o", svg_path, "--title", "a <test> & map"}).exit_code == 0);
  std::string svg;
  REQUIRE(cli::read_file(svg_path, svg, error));
#ifdef FRAGLESS_HAVE_EXPAT
  struct counts {
    int segments = 0, allocated = 0, legend = 0;
    bool title = false;
  } seen;
  XML_Parser parser = XML_ParserCreate(nullptr);
  XML_SetUserData(parser, &seen);
  XML_SetElementHandler(
      parser,
      [](void* data, const XML_Char* name, const XML_Char** attributes) {
        auto& c = *static_cast<counts*>(data);
        for (int i = 0; attributes[i] != nullptr; i += 2) {
          const std::string key = attributes[i], value = attributes[i + 1];
          if (key == "class" && value == "segment" && std::string(name) == "g") ++c.segments;
          if (key == "class" && value == "allocated" && std::string(name) == "rect") ++c.allocated;
          if (key == "class" && value == "legend") ++c.legend;
        }
        if (std::string(name) == "title") c.title = true;
      },
      [](void*, const XML_Char*) {});
  const bool well_formed = XML_Parse(parser, svg.data(), static_cast<int>(svg.size()), 1) == XML_STATUS_OK;
  INFO(XML_ErrorString(XML_GetErrorCode(parser)));
  XML_ParserFree(parser);
  CHECK(well_formed);
  CHECK(seen.segments == static_cast<int>(fixture::known_snapshot().segments.size()));
  CHECK(seen.allocated == 1 + 1 + 1 + 1);  // one legend swatch + one run per segment with allocations
  CHECK(seen.legend == 1);
  CHECK(seen.title);
#endif
  CHECK(svg.find("a &lt;test&gt; &amp; map") != std::string::npos);
}

TEST_CASE("errors are one line with documented exit codes") {
  environment env;
  const auto one_line = [](const testing::run_result& r) {
    return std::count(r.err.begin(), r.err.end(), '\n') == 1 && r.err.rfind("fragless-stats: ", 0) == 0;
  };
  SECTION("no such process") {
    const auto r = run_cli({"4194000"});
    CHECK(r.exit_code == 3);
    CHECK(one_line(r));
  }
  SECTION("a live process that does not use fragless") {
    const auto r = run_cli({std::to_string(::getpid())});
    CHECK(r.exit_code == 3);
    CHECK(r.err.find("does not publish") != std::string::npos);
    CHECK(one_line(r));
  }
  SECTION("a process killed without cleanup: stale page recognised and removed") {
    std::string pid;
    {
      fixture_process fixture;
      pid = fixture.pid();
      fixture.child.kill_hard();
    }
    CHECK(fs::exists(env.stats_dir() + "/" + pid + ".stats"));
    const auto r = run_cli({pid});
    CHECK(r.exit_code == 3);
    CHECK(r.err.find("exited") != std::string::npos);
    CHECK_FALSE(fs::exists(env.stats_dir() + "/" + pid + ".stats"));
  }
  SECTION("list removes stale pages") {
    std::string pid;
    {
      fixture_process fixture;
      pid = fixture.pid();
      fixture.child.kill_hard();
    }
    const auto r = run_cli({"list"});
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("no process") != std::string::npos);
    CHECK_FALSE(fs::exists(env.stats_dir() + "/" + pid + ".stats"));
  }
  SECTION("a page with a bad version is reported as such") {
    fixture_process fixture;
    const std::string page = env.stats_dir() + "/" + fixture.pid() + ".stats";
    std::fstream f(page, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(8);
    const std::uint32_t version = 77;
    f.write(reinterpret_cast<const char*>(&version), 4);
    f.close();
    const auto r = run_cli({fixture.pid()});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("version 77") != std::string::npos);
    CHECK(one_line(r));
    const auto listed = run_cli({"list"});
    CHECK(listed.exit_code == 0);
    CHECK(listed.err.find("version 77") != std::string::npos);
  }
  SECTION("a symlink in place of a page is refused") {
    ::mkdir(env.stats_dir().c_str(), 0700);
    const std::string target = env.root + "/elsewhere";
    { std::ofstream(target) << "x"; }
    fs::create_symlink(target, env.stats_dir() + "/4194001.stats");
    const auto r = run_cli({"4194001"});
    CHECK(r.exit_code != 0);
    CHECK(one_line(r));
  }
  SECTION("a process that does not answer snapshot requests") {
    fixture_process fixture({"--no-answer"});
    const auto r = run_cli({"snapshot", fixture.pid(), "-o", env.root + "/x.json", "--timeout", "0.3"});
    CHECK(r.exit_code == 4);
    CHECK(one_line(r));
    CHECK_FALSE(fs::exists(env.root + "/x.json"));
  }
  SECTION("missing, corrupt and foreign snapshot files") {
    CHECK(run_cli({"show", env.root + "/missing.json"}).exit_code == 1);
    { std::ofstream(env.root + "/bad.json") << R"({"schema":"fragless.snapshot/1","segments":[{"device":0)"; }
    auto r = run_cli({"show", env.root + "/bad.json"});
    CHECK(r.exit_code == 1);
    CHECK(one_line(r));
    { std::ofstream(env.root + "/bad.pickle", std::ios::binary) << "\x80\x02}q\x00(X"; }
    r = run_cli({"map", env.root + "/bad.pickle", "-o", env.root + "/m.svg"});
    CHECK(r.exit_code == 1);
    CHECK(one_line(r));
    // A pickle that would import and call something is refused, not run.
    { std::ofstream(env.root + "/evil.pickle", std::ios::binary) << "\x80\x02" "cos\nsystem\n(S'true'\ntR."; }
    r = run_cli({"show", env.root + "/evil.pickle"});
    CHECK(r.exit_code == 1);
    CHECK(one_line(r));
    { std::ofstream(env.root + "/text.txt") << "hello"; }
    CHECK(run_cli({"show", env.root + "/text.txt"}).exit_code == 1);
  }
  SECTION("usage errors") {
    CHECK(run_cli({"frobnicate"}).exit_code == 2);
    CHECK(run_cli({"list", "--bogus"}).exit_code == 2);
    CHECK(run_cli({"123", "--watch", "-1"}).exit_code == 2);
    CHECK(run_cli({"123", "--count", "3"}).exit_code == 2);
    CHECK(run_cli({"snapshot", "123"}).exit_code == 2);
    CHECK(run_cli({"map", "file.json"}).exit_code == 2);
    CHECK(run_cli({"list", "--json", "--csv"}).exit_code == 2);
  }
}

TEST_CASE("list keeps another PID namespace's page and marks it; --keep-stale marks exited ones in full") {
  environment env;
  fixture_process fixture;
  const std::uint64_t own = stats_directory::own_pid_namespace();
  REQUIRE(own != 0);
  // As `docker --ipc=host` would: pid 4194001 of another namespace, maybe alive there.
  write_page_copy(env, fixture, 4194001, own + 1);
  auto r = run_cli({"list"});
  REQUIRE(r.exit_code == 0);
  INFO(r.out);
  CHECK(fs::exists(env.stats_dir() + "/4194001.stats"));
  CHECK(r.out.find("(other pid namespace)") != std::string::npos);
  const auto as_json = run_cli({"list", "--json"});
  json::value listed;
  std::string error;
  REQUIRE(json::parse(as_json.out, listed, error));
  bool marked = false;
  for (const auto& process : listed.find("processes")->items())
    if (process.find("pid")->as_integer() == 4194001) marked = process.find("other_pid_namespace") != nullptr;
  CHECK(marked);
  // Our namespace, pid gone: stale, listed with the whole marker when kept.
  write_page_copy(env, fixture, 4194002, own);
  r = run_cli({"list", "--keep-stale"});
  CHECK(r.out.find("stats_publisher (exited)") != std::string::npos);
  CHECK(fs::exists(env.stats_dir() + "/4194002.stats"));
  r = run_cli({"list"});
  CHECK_FALSE(fs::exists(env.stats_dir() + "/4194002.stats"));
  CHECK(fs::exists(env.stats_dir() + "/4194001.stats"));
}

TEST_CASE("process names reach the terminal and JSON escaped") {
  environment env;
  fixture_process fixture;
  write_page_copy(env, fixture, 4194003, stats_directory::own_pid_namespace() + 1, "ev\x1b]0;owned\x07il\xff\x9b");
  const auto text = run_cli({"list"});
  REQUIRE(text.exit_code == 0);
  INFO(text.out);
  CHECK(text.out.find('\x1b') == std::string::npos);
  CHECK(text.out.find('\x07') == std::string::npos);
  CHECK(text.out.find('\xff') == std::string::npos);
  CHECK(text.out.find("ev\\x1b]0;owned") != std::string::npos);  // cut to 16 bytes, not inside an escape
  const auto as_json = run_cli({"list", "--json"});
  REQUIRE(as_json.exit_code == 0);
  json::value root;
  std::string error;
  CHECK(json::parse(as_json.out, root, error));
  CHECK(as_json.out.find('\xff') == std::string::npos);
  const auto one = run_cli({"4194003"});
  CHECK(one.out.find('\x1b') == std::string::npos);
  CHECK(one.out.find("ev\\x1b]0;owned\\x07il\\xff\\x9b") != std::string::npos);
  CHECK(as_json.out.find("ev\\\\x1b]0;owned\\\\x07il\\\\xff\\\\x9b") != std::string::npos);
}

TEST_CASE("a corrupt page is reported as corrupt, not shown as numbers") {
  environment env;
  fixture_process fixture;
  write_page_copy(env, fixture, 4194004, stats_directory::own_pid_namespace() + 1);
  {
    std::fstream f(env.stats_dir() + "/4194004.stats", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(sizeof(stats_page::header) + offsetof(stats_page::device_slot, values)));
    const std::int64_t negative = -(std::int64_t{1} << 55);
    f.write(reinterpret_cast<const char*>(&negative), sizeof negative);
  }
  const auto r = run_cli({"list"});
  CHECK(r.exit_code == 0);
  CHECK(r.err.find("4194004.stats: corrupt stats page") != std::string::npos);
  CHECK(count_lines_starting(r.out, "4194004 ") == 0);
  CHECK(count_lines_starting(r.out, fixture.pid() + " ") == 2);
  const auto one = run_cli({"4194004"});
  CHECK(one.exit_code == 1);
  CHECK(one.err.find("corrupt") != std::string::npos);
}

TEST_CASE("list --watch redraws a bounded number of times; device memory columns; --version") {
  environment env;
  fixture_process fixture;
  const auto text = run_cli({"list", "--watch", "0.05", "--count", "3"});
  REQUIRE(text.exit_code == 0);
  CHECK(count_lines_starting(text.out, "Every 0.05s: fragless-stats list") == 3);
  CHECK(count_lines_starting(text.out, fixture.pid() + " ") == 6);
  CHECK(text.out.find("DEV TOTAL") != std::string::npos);
  CHECK(text.out.find("DEV FREE") != std::string::npos);
  // Tests run with simcuda's libnvidia-ml.so.1 on the library path: 80 GiB devices by default.
  if (std::getenv("SIMCUDA_MEMORY") == nullptr)
    CHECK(text.out.find(format_bytes_readable(std::uint64_t{80} << 30)) != std::string::npos);
  const auto lines = run_cli({"--json", "--watch", "0.05", "--count", "2"});
  CHECK(count_lines_starting(lines.out, "{\"schema\":\"fragless.process_list/1\"") == 2);
  CHECK(run_cli({"list", "--count", "2"}).exit_code == 2);
  const auto version = run_cli({"--version"});
  CHECK(version.exit_code == 0);
  CHECK(version.out.rfind("fragless-stats ", 0) == 0);
}

TEST_CASE("every subcommand has --help with the exit codes") {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--help"}, {"list", "--help"}, {"123", "--help"}, {"snapshot", "--help"},
                                             {"show", "--help"}, {"map", "--help"}, {"options", "--help"}}) {
    const auto r = run_cli(args);
    INFO(args[0]);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("usage: fragless-stats") != std::string::npos);
    CHECK(r.out.find("Exit codes:") != std::string::npos);
  }
}

TEST_CASE("options prints the table, and --markdown the README table") {
  const auto text = run_cli({"options"});
  CHECK(text.exit_code == 0);
  CHECK(text.out.find("publish_stats") != std::string::npos);
  const auto markdown = run_cli({"options", "--markdown"});
  CHECK(markdown.out == options_markdown_table());
}
