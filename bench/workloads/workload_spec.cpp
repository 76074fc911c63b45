// workload_spec: parsing, formatting and dispatch of built-in workload specs.
// Invariant: format_workload_spec(parse_workload_spec(s)) names the same workload as s,
// with every key spelled out.
#include "workload.hpp"

#include <stdexcept>

namespace fragless::bench {

namespace {

workload_spec defaults_for(const std::string& kind) {
  if (kind == "transformer-training") return {kind, 1024, 12, 8, 4, 1024, 1};
  if (kind == "kv-cache-inference") return {kind, 2048, 24, 8, 64, 512, 1};
  if (kind == "cnn-training") return {kind, 64, 8, 64, 3, 224, 1};
  throw std::invalid_argument("unknown workload kind '" + kind + "' (known: transformer-training, "
                              "kv-cache-inference, cnn-training)");
}

std::uint64_t parse_value(const std::string& key, const std::string& text) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 12) {
    throw std::invalid_argument("workload key '" + key + "' needs a positive integer, got '" + text + "'");
  }
  return std::stoull(text);
}

}  // namespace

std::vector<std::string> workload_kinds() {
  return {"transformer-training", "kv-cache-inference", "cnn-training"};
}

workload_spec parse_workload_spec(const std::string& text) {
  const std::size_t colon = text.find(':');
  workload_spec spec = defaults_for(text.substr(0, colon));
  if (colon == std::string::npos) return spec;
  std::size_t start = colon + 1;
  while (start < text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(start, end - start);
    const std::size_t equals = item.find('=');
    if (equals == std::string::npos) throw std::invalid_argument("workload option '" + item + "' is not key=value");
    const std::string key = item.substr(0, equals);
    const std::uint64_t value = parse_value(key, item.substr(equals + 1));
    if (value == 0 && key != "seed") throw std::invalid_argument("workload key '" + key + "' must be positive");
    if (key == "model") spec.model = value;
    else if (key == "layers") spec.layers = value;
    else if (key == "batch") spec.batch = value;
    else if (key == "steps") spec.steps = value;
    else if (key == "sequence") spec.sequence = value;
    else if (key == "seed") spec.seed = value;
    else throw std::invalid_argument("unknown workload key '" + key + "'");
    start = end + 1;
  }
  if (spec.model > 65536 || spec.layers > 1024 || spec.batch > 65536 || spec.steps > 100000 || spec.sequence > 1048576) {
    throw std::invalid_argument("workload '" + text + "' is absurdly large");
  }
  return spec;
}

std::string format_workload_spec(const workload_spec& spec) {
  return spec.kind + ":model=" + std::to_string(spec.model) + ",layers=" + std::to_string(spec.layers) +
         ",batch=" + std::to_string(spec.batch) + ",steps=" + std::to_string(spec.steps) +
         ",sequence=" + std::to_string(spec.sequence) + ",seed=" + std::to_string(spec.seed);
}

traces::trace generate_workload(const workload_spec& spec) {
  if (spec.kind == "transformer-training") return generate_transformer_training(spec);
  if (spec.kind == "kv-cache-inference") return generate_kv_cache_inference(spec);
  if (spec.kind == "cnn-training") return generate_cnn_training(spec);
  throw std::invalid_argument("unknown workload kind '" + spec.kind + "'");
}

std::vector<workload_spec> default_workloads() {
  std::vector<workload_spec> all;
  for (const std::string& kind : workload_kinds()) all.push_back(defaults_for(kind));
  return all;
}

}  // namespace fragless::bench
