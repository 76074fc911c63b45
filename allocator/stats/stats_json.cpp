// The stats JSON document, Note [Stats JSON] in fragless/stats.hpp. Invariant: keys are
// exactly flatten()'s, so the JSON, the summary and the CLI agree by construction.
#include <string>

#include "fragless/stats.hpp"
#include "json.hpp"

namespace fragless {

std::string to_json(const device_stats& stats, int device) {
  json::value root = json::value::make_object();
  root.set("schema", json::value::make_string(std::string(stats_json_schema)));
  root.set("device", json::value::make_integer(device));
  json::value values = json::value::make_object();
  for (const stat_value& v : flatten(stats))
    values.set(v.key, v.is_integer ? json::value::make_integer(v.integer) : json::value::make_real(v.real));
  root.set("stats", std::move(values));
  return json::write(root);
}

bool stats_from_json(std::string_view text, device_stats& stats, int& device, std::string& error) {
  json::value root;
  if (!json::parse(text, root, error)) return false;
  const json::value* values = &root;
  device = 0;
  if (const json::value* schema = root.find("schema")) {
    if (schema->kind() != json::value::type::string || schema->as_string() != stats_json_schema) {
      error = "unsupported stats schema (expected " + std::string(stats_json_schema) + ")";
      return false;
    }
    values = root.find("stats");
    if (values == nullptr) {
      error = "no \"stats\" object";
      return false;
    }
    if (const json::value* number = root.find("device")) device = static_cast<int>(number->as_integer());
  }
  if (values->kind() != json::value::type::object) {
    error = "\"stats\" is not an object";
    return false;
  }
  device_stats parsed{};
  for (const auto& [key, number] : values->members())
    if (number.kind() == json::value::type::integer) set_flat_value(parsed, key, number.as_integer());
  stats = parsed;
  return true;
}

}  // namespace fragless
