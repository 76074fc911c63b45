// corpus: family dispatch, corpus names, and the peak cap (Note [Corpus peak cap]).
#include "corpus.hpp"


#include <stdexcept>

namespace fragless::bench {

namespace {

using generator = traces::trace (*)(const std::string&, std::uint64_t);

struct family_entry {
  const char* name;
  generator generate;
};

const family_entry families[] = {
    {"huge-tensors", generate_huge_tensors},
    {"dynamic-shapes", generate_dynamic_shapes},
    {"many-streams", generate_many_streams},
    {"kv-cache-eviction", generate_kv_cache_eviction},
    {"moe-routing", generate_moe_routing},
    {"activation-recompute", generate_activation_recompute},
    {"pipeline-1f1b", generate_pipeline_1f1b},
    {"params-optimizer", generate_params_optimizer},
    // Note [Held-out families]
    {"sharded-data-parallel", generate_sharded_data_parallel},
    {"unet-resolution", generate_unet_resolution},
    {"quantized-attention", generate_quantized_attention},
    // Note [Second held-out wave]
    {"rlhf-ppo", generate_rlhf_ppo},
    {"model-swap", generate_model_swap},
    {"graph-batches", generate_graph_batches},
    // Note [Third held-out wave]
    {"two-loops", generate_two_loops},
    {"train-eval-checkpoint", generate_train_eval_checkpoint},
    {"speculative-decoding", generate_speculative_decoding},
};

std::uint64_t peak_live_bytes(const traces::trace& t) {
  std::uint64_t live = 0, peak = 0;
  for (const traces::trace_event& e : t.events) {
    live = e.op == traces::trace_op::alloc ? live + e.size_bytes : live - e.size_bytes;
    if (live > peak) peak = live;
  }
  return peak;
}

// Note [Corpus peak cap]: one factor for every block, so a free still repeats its size.
void apply_peak_cap(traces::trace& t) {
  const std::uint64_t peak = peak_live_bytes(t);
  if (peak <= corpus_peak_cap_bytes) return;
  // factor = cap / peak in 1/2^20ths (< 2^20 since peak > cap): integer arithmetic only.
  const std::uint64_t factor = (corpus_peak_cap_bytes << 20) / peak;
  for (traces::trace_event& e : t.events) {
    const std::uint64_t scaled = (e.size_bytes >> 20) * factor + (((e.size_bytes & ((1u << 20) - 1)) * factor) >> 20);
    e.size_bytes = scaled == 0 ? 1 : scaled;
  }
  t.notes.push_back("sizes scaled by " + std::to_string(corpus_peak_cap_bytes >> 20) + "/" +
                    std::to_string(peak >> 20) + " to cap the peak at " +
                    std::to_string(corpus_peak_cap_bytes >> 30) + " GiB");
}

}  // namespace

const std::vector<std::string>& corpus_families() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const family_entry& f : families) out.emplace_back(f.name);
    return out;
  }();
  return names;
}

traces::trace generate_corpus_workload(const std::string& family, std::uint64_t seed) {
  for (const family_entry& f : families) {
    if (family != f.name) continue;
    traces::trace t = f.generate(corpus_source(family, seed), seed);
    apply_peak_cap(t);
    return t;
  }
  std::string known;
  for (const family_entry& f : families) known += (known.empty() ? "" : ", ") + std::string(f.name);
  throw std::invalid_argument("unknown corpus family '" + family + "' (known: " + known + ")");
}

std::string corpus_source(const std::string& family, std::uint64_t seed) {
  return "corpus:" + family + ":" + std::to_string(seed);
}

bool is_corpus_source(const std::string& source) { return source.rfind("corpus:", 0) == 0; }

traces::trace generate_corpus_source(const std::string& source) {
  const std::size_t colon = source.rfind(':');
  if (!is_corpus_source(source) || colon <= 7) throw std::invalid_argument("corpus name '" + source + "' is not corpus:FAMILY:SEED");
  const std::string seed_text = source.substr(colon + 1);
  if (seed_text.empty() || seed_text.size() > 18 || seed_text.find_first_not_of("0123456789") != std::string::npos) {
    throw std::invalid_argument("corpus name '" + source + "' needs a numeric seed");
  }
  return generate_corpus_workload(source.substr(7, colon - 7), std::stoull(seed_text));
}

}  // namespace fragless::bench
