// workload: built-in workloads, so the main job needs no input files. A workload is named
// by a spec string "kind:key=value,..." that fully determines its trace (deterministic
// seed), so a child process can regenerate exactly the trace its parent meant.
// Invariant: generate_workload(parse_workload_spec(s)) is a pure function of s.
#pragma once

#include "traces/trace.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace fragless::bench {

struct workload_spec {
  std::string kind;          // transformer-training | kv-cache-inference | cnn-training
  std::uint64_t model = 0;   // model size: hidden width (transformers) / base channels (CNN)
  std::uint64_t layers = 0;  // transformer layers / CNN stages x blocks
  std::uint64_t batch = 0;
  std::uint64_t steps = 0;   // training steps / generated tokens
  std::uint64_t sequence = 0;  // max sequence length (transformers) / image side (CNN)
  std::uint64_t seed = 1;
};

// "kind:model=1024,layers=12,batch=8,steps=3,sequence=1024,seed=1" (missing keys take the
// kind's defaults). Throws std::invalid_argument with a one-line reason.
workload_spec parse_workload_spec(const std::string& text);
std::string format_workload_spec(const workload_spec& spec);
traces::trace generate_workload(const workload_spec& spec);

// The workloads `fragless-bench builtin` runs by default.
std::vector<workload_spec> default_workloads();
std::vector<std::string> workload_kinds();

// Generators, one per file.
traces::trace generate_transformer_training(const workload_spec& spec);
traces::trace generate_kv_cache_inference(const workload_spec& spec);
traces::trace generate_cnn_training(const workload_spec& spec);

}  // namespace fragless::bench
