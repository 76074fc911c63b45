// corpus: the generated workload corpus (issue "a generated workload corpus no one can
// tune to"). Seventeen families of what real programs do to an allocator (the last nine
// held out, in three waves: Note [Held-out families], Note [Second held-out wave], Note
// [Third held-out wave]), each a seeded
// multi-step loop whose sizes, counts and lifetimes come from wide distributions. A corpus
// workload is named "corpus:FAMILY:SEED"; the name fully determines the trace.
// Invariant: generate_corpus_workload(f, s) is a pure function of (f, s), byte for byte,
// and its peak of live bytes is at most corpus_peak_cap_bytes (Note [Corpus peak cap]).
#pragma once

#include "traces/trace.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace fragless::bench {

// Note [Corpus peak cap]
// Sizes are drawn first (log-uniform up to 4 GiB a block) and the whole trace is then
// scaled down, every block by the same factor, when its peak of live bytes would exceed
// corpus_peak_cap_bytes. 32 GiB leaves room on simcuda's default 80 GiB device for an
// allocator that reserves twice what is live, so OOMs measure nothing but the cap.
inline constexpr std::uint64_t corpus_peak_cap_bytes = std::uint64_t{32} << 30;
inline constexpr std::uint64_t corpus_max_block_bytes = std::uint64_t{4} << 30;

// Every family, in report order.
const std::vector<std::string>& corpus_families();

// Throws std::invalid_argument naming the known families for an unknown one.
traces::trace generate_corpus_workload(const std::string& family, std::uint64_t seed);

// "corpus:FAMILY:SEED" and back (throws std::invalid_argument on a malformed name).
std::string corpus_source(const std::string& family, std::uint64_t seed);
bool is_corpus_source(const std::string& source);
traces::trace generate_corpus_source(const std::string& source);

// The families, one generator each (corpus_training_families.cpp,
// corpus_serving_families.cpp, corpus_held_out_families.cpp: Note [Held-out families],
// corpus_second_wave_families.cpp: Note [Second held-out wave],
// corpus_third_wave_families.cpp: Note [Third held-out wave]). `name` is the trace's name.
traces::trace generate_huge_tensors(const std::string& name, std::uint64_t seed);
traces::trace generate_dynamic_shapes(const std::string& name, std::uint64_t seed);
traces::trace generate_activation_recompute(const std::string& name, std::uint64_t seed);
traces::trace generate_pipeline_1f1b(const std::string& name, std::uint64_t seed);
traces::trace generate_params_optimizer(const std::string& name, std::uint64_t seed);
traces::trace generate_many_streams(const std::string& name, std::uint64_t seed);
traces::trace generate_kv_cache_eviction(const std::string& name, std::uint64_t seed);
traces::trace generate_moe_routing(const std::string& name, std::uint64_t seed);
traces::trace generate_sharded_data_parallel(const std::string& name, std::uint64_t seed);
traces::trace generate_unet_resolution(const std::string& name, std::uint64_t seed);
traces::trace generate_quantized_attention(const std::string& name, std::uint64_t seed);
traces::trace generate_rlhf_ppo(const std::string& name, std::uint64_t seed);
traces::trace generate_model_swap(const std::string& name, std::uint64_t seed);
traces::trace generate_graph_batches(const std::string& name, std::uint64_t seed);
traces::trace generate_two_loops(const std::string& name, std::uint64_t seed);
traces::trace generate_train_eval_checkpoint(const std::string& name, std::uint64_t seed);
traces::trace generate_speculative_decoding(const std::string& name, std::uint64_t seed);

}  // namespace fragless::bench
