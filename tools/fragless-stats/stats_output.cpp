// JSON and CSV renderings of live readings; see stats_output.hpp (Note [CLI JSON]).
#include "stats_output.hpp"

#include <cstdio>

namespace fragless::cli {

json::value process_json(long pid, const std::string& command, const std::vector<stats_reader::device_reading>& devices) {
  json::value process = json::value::make_object();
  process.set("pid", json::value::make_integer(pid));
  process.set("command", json::value::make_string(command));
  json::value list = json::value::make_array();
  for (const auto& reading : devices) {
    json::value device = json::value::make_object();
    device.set("device", json::value::make_integer(reading.device));
    device.set("published_ns", json::value::make_integer(reading.published_ns));
    json::value stats = json::value::make_object();
    for (const stat_value& v : flatten(reading.stats))
      stats.set(v.key, v.is_integer ? json::value::make_integer(v.integer) : json::value::make_real(v.real));
    device.set("stats", std::move(stats));
    list.push(std::move(device));
  }
  process.set("devices", std::move(list));
  return process;
}

std::string csv_header() {
  std::string line = "pid,command,device,published_ns";
  for (const stat_value& v : flatten(device_stats{})) line += "," + v.key;
  return line + "\n";
}

namespace {
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}
}  // namespace

std::string csv_rows(long pid, const std::string& command, const std::vector<stats_reader::device_reading>& devices) {
  std::string out;
  for (const auto& reading : devices) {
    out += std::to_string(pid) + "," + csv_field(command) + "," + std::to_string(reading.device) + "," +
           std::to_string(reading.published_ns);
    for (const stat_value& v : flatten(reading.stats)) {
      if (v.is_integer) {
        out.append(",").append(std::to_string(v.integer));  // not "," + ...: GCC 12 -O3 false -Wrestrict
      } else {
        char buffer[32];
        std::snprintf(buffer, sizeof buffer, ",%.6f", v.real);
        out += buffer;
      }
    }
    out += "\n";
  }
  return out;
}

}  // namespace fragless::cli
