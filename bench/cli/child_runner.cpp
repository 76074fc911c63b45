// child_runner: fork/exec of `fragless-bench replay-one`, the outcome protocol, and the
// child's side (see Note [One child per replay] in the header).
#include "child_runner.hpp"

#include "replay/cuda_device.hpp"
#include "replay/cuda_streams.hpp"
#include "replay/device_counters.hpp"
#include "trace_sources.hpp"

#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace fragless::bench {

namespace {

std::string self_path() {
  char buffer[4096];
  const ssize_t length = ::readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  if (length <= 0) return "fragless-bench";
  buffer[length] = '\0';
  return buffer;
}

// Note [Counting device calls] (replay/device_counters.hpp): the counter goes first in
// LD_PRELOAD, and the child is told to read it (not simcuda) whatever else is loaded.
void add_counting_library(std::vector<std::string>& environment, const std::string& library) {
  std::string preload = library, asan_options = "verify_asan_link_order=0";
  std::vector<std::string> kept;
  for (const std::string& variable : environment) {
    if (variable.rfind("LD_PRELOAD=", 0) == 0) {
      if (variable.size() > 11) preload += ":" + variable.substr(11);
    } else if (variable.rfind("ASAN_OPTIONS=", 0) == 0) {
      if (variable.size() > 13) asan_options = variable.substr(13) + ":" + asan_options;
    } else if (variable.rfind("FRAGLESS_BENCH_COUNTING=", 0) != 0) {
      kept.push_back(variable);
    }
  }
  kept.push_back("LD_PRELOAD=" + preload);
  kept.push_back("FRAGLESS_BENCH_COUNTING=interposer");
  // A sanitized build preloads a sanitized library ahead of the sanitizer's runtime.
  kept.push_back("ASAN_OPTIONS=" + asan_options);
  environment = std::move(kept);
}

// The child's environment: ours, with the peer's settings replaced.
std::vector<std::string> child_environment(const child_request& request) {
  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string variable = *entry;
    if (variable.rfind("PYTORCH_CUDA_ALLOC_CONF=", 0) == 0 || variable.rfind("FRAGLESS_CONF=", 0) == 0) continue;
    environment.push_back(variable);
  }
  if (request.allocator == "pytorch-expandable") environment.emplace_back("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
  if (!request.configuration.empty()) environment.push_back("FRAGLESS_CONF=" + request.configuration);
  if (!request.counting_library.empty()) add_counting_library(environment, request.counting_library);
  return environment;
}

// Protocol values are single lines.
std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  if (text.size() > 400) text = text.substr(0, 400) + "...";
  return text;
}

std::string last_line_of(std::FILE* file) {
  std::string text;
  std::rewind(file);
  char buffer[4096];
  std::size_t got;
  while ((got = std::fread(buffer, 1, sizeof buffer, file)) > 0) {
    text.append(buffer, got);
    if (text.size() > 65536) text.erase(0, text.size() - 8192);
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  const std::size_t newline = text.rfind('\n');
  return newline == std::string::npos ? text : text.substr(newline + 1);
}

}  // namespace

std::string encode_outcome(const replay_outcome& o, const std::string& unavailable_reason) {
  std::ostringstream out;
  out.precision(17);
  out << "status\t" << one_line(o.status) << "\n";
  if (!unavailable_reason.empty()) out << "unavailable\t" << one_line(unavailable_reason) << "\n";
  if (!o.first_failure.empty()) out << "first_failure\t" << one_line(o.first_failure) << "\n";
  out << "events_replayed\t" << o.events_replayed << "\n"
      << "peak_reserved_bytes\t" << o.peak_reserved_bytes << "\n"
      << "reserved_minus_allocated_at_peak_bytes\t" << o.reserved_minus_allocated_at_peak_bytes << "\n"
      << "peak_live_bytes\t" << o.peak_live_bytes << "\n"
      << "device_used_peak_bytes\t" << o.device_used_peak_bytes << "\n"
      << "ooms\t" << o.ooms << "\n"
      << "host_ns_per_op\t" << o.host_ns_per_op << "\n"
      << "emulation_ns_per_op\t" << o.emulation_ns_per_op << "\n"
      << "longest_op_ns\t" << o.longest_op_ns << "\n"
      << "counters_available\t" << (o.counters_available ? 1 : 0) << "\n"
      << "device_allocs\t" << o.calls.allocs << "\n"
      << "device_frees\t" << o.calls.frees << "\n"
      << "device_maps\t" << o.calls.maps << "\n"
      << "device_unmaps\t" << o.calls.unmaps << "\n"
      << "syncs\t" << o.calls.syncs << "\n"
      << "steady_calls\t" << o.steady_calls << "\n"
      << "last_calling_pass\t" << o.last_calling_pass << "\n";
  out << "calls_by_pass";
  for (std::uint64_t calls : o.calls_by_pass) out << "\t" << calls;
  out << "\nhost_ns_by_pass";
  for (double ns : o.host_ns_by_pass) out << "\t" << ns;
  out << "\n";
  // Note [Cost model]: the two priced passes, "pass NAME host obtained returned calls...".
  for (const auto& [name, pass] : {std::pair<const char*, const pass_activity*>{"first", &o.first_pass},
                                   std::pair<const char*, const pass_activity*>{"steady", &o.steady_pass}}) {
    out << "pass\t" << name << "\t" << pass->host_ns << "\t" << pass->obtained_bytes << "\t" << pass->returned_bytes;
    for (std::uint64_t calls : pass->calls) out << "\t" << calls;
    out << "\n";
  }
  for (const timeline_point& p : o.timeline) {
    out << "point\t" << p.event << "\t" << p.live_bytes << "\t" << p.reserved_bytes << "\n";
  }
  out << "end\n";
  return out.str();
}

child_result decode_outcome(const std::string& text) {
  child_result result;
  replay_outcome& o = result.outcome;
  o.status = "failed: child produced no result";
  bool ended = false;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const std::size_t tab = line.find('\t');
    const std::string key = line.substr(0, tab);
    const std::string value = tab == std::string::npos ? std::string() : line.substr(tab + 1);
    try {
      if (key == "status") o.status = value;
      else if (key == "unavailable") result.unavailable_reason = value;
      else if (key == "first_failure") o.first_failure = value;
      else if (key == "events_replayed") o.events_replayed = std::stoull(value);
      else if (key == "peak_reserved_bytes") o.peak_reserved_bytes = std::stoull(value);
      else if (key == "reserved_minus_allocated_at_peak_bytes") o.reserved_minus_allocated_at_peak_bytes = std::stoull(value);
      else if (key == "peak_live_bytes") o.peak_live_bytes = std::stoull(value);
      else if (key == "device_used_peak_bytes") o.device_used_peak_bytes = std::stoull(value);
      else if (key == "ooms") o.ooms = std::stoull(value);
      else if (key == "host_ns_per_op") o.host_ns_per_op = std::stod(value);
      else if (key == "emulation_ns_per_op") o.emulation_ns_per_op = std::stod(value);
      else if (key == "longest_op_ns") o.longest_op_ns = std::stoull(value);
      else if (key == "counters_available") o.counters_available = value == "1";
      else if (key == "device_allocs") o.calls.allocs = std::stoull(value);
      else if (key == "device_frees") o.calls.frees = std::stoull(value);
      else if (key == "device_maps") o.calls.maps = std::stoull(value);
      else if (key == "device_unmaps") o.calls.unmaps = std::stoull(value);
      else if (key == "syncs") o.calls.syncs = std::stoull(value);
      else if (key == "steady_calls") o.steady_calls = std::stoll(value);
      else if (key == "last_calling_pass") o.last_calling_pass = std::stoll(value);
      else if (key == "calls_by_pass" || key == "host_ns_by_pass") {
        std::istringstream fields(value);
        if (key == "calls_by_pass") {
          for (std::uint64_t calls; fields >> calls;) o.calls_by_pass.push_back(calls);
        } else {
          for (double ns; fields >> ns;) o.host_ns_by_pass.push_back(ns);
        }
        if (!fields.eof()) throw std::invalid_argument("bad " + key + " line");
      }
      else if (key == "pass") {
        std::istringstream fields(value);
        std::string name;
        pass_activity pass;
        fields >> name >> pass.host_ns >> pass.obtained_bytes >> pass.returned_bytes;
        for (std::uint64_t& calls : pass.calls) fields >> calls;
        if (!fields) throw std::invalid_argument("bad pass line");
        (name == "first" ? o.first_pass : o.steady_pass) = pass;
      } else if (key == "point") {
        timeline_point p;
        std::istringstream fields(value);
        fields >> p.event >> p.live_bytes >> p.reserved_bytes;
        o.timeline.push_back(p);
      } else if (key == "end") ended = true;
    } catch (const std::exception&) {
      o.status = "failed: malformed child output";
      return result;
    }
  }
  if (!ended && o.status.rfind("failed", 0) != 0) o.status = "failed: truncated child output";
  return result;
}

namespace {

struct spawned {
  std::string output;
  int wait_status = 0;
  std::string failure;     // fork/pipe/exec trouble
  std::string last_error;  // the child's last stderr line (when not passed through)
};

// fork + execve of this program with `arguments`, stdout read to the end.
spawned spawn_self(std::vector<std::string> arguments, std::vector<std::string> environment, bool pass_stderr) {
  spawned result;
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {  // CLOEXEC: the corpus forks from several threads
    result.failure = "pipe: " + std::string(std::strerror(errno));
    return result;
  }
  const std::string program = self_path();
  arguments.at(0) = program;
  std::vector<char*> argv_pointers, env_pointers;
  for (std::string& a : arguments) argv_pointers.push_back(a.data());
  argv_pointers.push_back(nullptr);
  for (std::string& e : environment) env_pointers.push_back(e.data());
  env_pointers.push_back(nullptr);

  // The child's stderr goes to a scratch file: peers and simcuda can be chatty; the last
  // line is kept for the status when the child fails.
  std::FILE* error_log = pass_stderr ? nullptr : std::tmpfile();
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child < 0) {
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    if (error_log != nullptr) std::fclose(error_log);
    result.failure = "fork: " + std::string(std::strerror(errno));
    return result;
  }
  if (child == 0) {
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    if (error_log != nullptr) ::dup2(::fileno(error_log), STDERR_FILENO);
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    ::execve(program.c_str(), argv_pointers.data(), env_pointers.data());
    _exit(127);
  }
  ::close(pipe_fds[1]);
  char buffer[65536];
  for (;;) {
    const ssize_t got = ::read(pipe_fds[0], buffer, sizeof buffer);
    if (got > 0) result.output.append(buffer, static_cast<std::size_t>(got));
    else if (got < 0 && errno == EINTR) continue;
    else break;
  }
  ::close(pipe_fds[0]);
  while (::waitpid(child, &result.wait_status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(result.wait_status) && WEXITSTATUS(result.wait_status) == 127) {
    result.failure = "could not start " + program;
  }
  if (error_log != nullptr) {
    result.last_error = last_line_of(error_log);
    std::fclose(error_log);
  }
  return result;
}

}  // namespace

child_result run_child(const child_request& request) {
  std::vector<std::string> arguments = {
      "fragless-bench", "replay-one", "--source", request.source, "--allocator", request.allocator,
      "--repetitions", std::to_string(request.repetitions), "--max-events", std::to_string(request.max_events),
      "--device-call-ns", std::to_string(request.device_call_ns), "--host-work-ns", std::to_string(request.host_work_ns),
      "--timeout", std::to_string(request.timeout_seconds)};
  if (request.capacity_bytes != 0) {
    arguments.push_back("--capacity");
    arguments.push_back(std::to_string(request.capacity_bytes));
  }
  if (!request.configuration.empty()) {
    arguments.push_back("--configuration");
    arguments.push_back(request.configuration);
  }
  if (!request.call_log_path.empty()) {
    arguments.push_back("--call-log-file");
    arguments.push_back(request.call_log_path);
  }
  const spawned child = spawn_self(std::move(arguments), child_environment(request), request.pass_stderr);
  child_result result = decode_outcome(child.output);
  if (!child.failure.empty()) {
    result.outcome.status = "failed: " + child.failure;
  } else if (WIFSIGNALED(child.wait_status)) {
    const int signal_number = WTERMSIG(child.wait_status);
    result.outcome.status = signal_number == SIGALRM
                                ? "failed: timed out after " + std::to_string(request.timeout_seconds) + " s"
                                : "failed: crashed (" + std::string(strsignal(signal_number)) + ")";
  }
  if (result.outcome.status.rfind("failed", 0) == 0 && !child.last_error.empty()) {
    result.outcome.status += " [stderr: " + one_line(child.last_error) + "]";
  }
  return result;
}

self_run run_self(std::vector<std::string> arguments, const std::vector<std::string>& environment, bool pass_stderr) {
  const spawned child = spawn_self(std::move(arguments), environment, pass_stderr);
  self_run result;
  result.output = child.output;
  if (!child.failure.empty()) result.status = child.failure;
  else if (WIFSIGNALED(child.wait_status)) result.status = "crashed (" + std::string(strsignal(WTERMSIG(child.wait_status))) + ")";
  else if (!WIFEXITED(child.wait_status) || WEXITSTATUS(child.wait_status) != 0) result.status = "failed";
  if (!result.status.empty() && !child.last_error.empty()) result.status += " [stderr: " + one_line(child.last_error) + "]";
  return result;
}

int device_info_main() {
  ::alarm(120);
  const device_facts facts = query_device();
  std::printf("ok\t%d\nname\t%s\ntotal_bytes\t%llu\nfree_bytes\t%llu\nerror\t%s\n", facts.ok ? 1 : 0,
              one_line(facts.name).c_str(), static_cast<unsigned long long>(facts.total_bytes),
              static_cast<unsigned long long>(facts.free_bytes), one_line(facts.error).c_str());
  std::fflush(stdout);
  std::_Exit(0);
}

int replay_one_main(const child_request& request) {
  if (request.timeout_seconds > 0) ::alarm(static_cast<unsigned>(request.timeout_seconds));
  replay_outcome outcome;
  std::string unavailable;
  try {
    const traces::trace t = load_source(request.source);
    // Note [Counting device calls]: without simcuda, bytes in use come from cudaMemGetInfo.
    const device_counters counters(&read_device_used_bytes);
    counters.set_auto_complete(true);  // simcuda only
    if (request.capacity_bytes != 0 && !counters.set_capacity(request.capacity_bytes)) {
      outcome.status = counters.simulated() ? "failed: cannot set device capacity"
                                            : "failed: a real GPU's capacity cannot be set (--capacity is simcuda-only)";
    } else if (request.device_call_ns != 0 && !counters.simulated()) {
      outcome.status = "failed: --device-call-ns is simcuda-only (a real GPU's calls have real prices)";
    } else {
      if (request.device_call_ns != 0) {
        for (const char* name : costed_functions()) counters.set_call_cost_ns(name, request.device_call_ns);
      }
      peer_creation peer = create_peer(request.allocator, request.configuration);
      if (!peer.allocator) {
        unavailable = peer.unavailable_reason;
        outcome.status = "unavailable";
      } else {
        const std::vector<stream_handle> streams = create_replay_streams(t.stream_count);
        replay_options options;
        options.repetitions = request.repetitions;
        options.max_events = request.max_events;
        options.host_work_ns = request.host_work_ns;
        call_log log;  // Note [Call log]
        std::string log_error;
        if (!request.call_log_path.empty() && !log.open(request.call_log_path, log_error)) {
          outcome.status = "failed: " + log_error;
        } else {
          if (log.is_open()) options.log = &log;
          outcome = replay_trace(t, *peer.allocator, streams, options, counters);
        }
        peer.allocator.reset();
        destroy_replay_streams(streams);
      }
    }
  } catch (const std::exception& e) {
    outcome.status = std::string("failed: ") + e.what();
  }
  const std::string encoded = encode_outcome(outcome, unavailable);
  std::fwrite(encoded.data(), 1, encoded.size(), stdout);
  std::fflush(stdout);
  // Skip static destructors: the peers' process-global state (c10) is not ours to tear down.
  std::_Exit(0);
}

}  // namespace fragless::bench
