// kv_cache_inference: autoregressive generation with a KV cache that grows by one token
// per step the way eager frameworks grow it: torch.cat builds a new key and value tensor
// one token longer and frees the old one, for every layer. Several requests run one after
// another with different prompt lengths (seeded). Weights are bf16.
// Invariant: each request frees its cache and temporaries; only the weights stay.
#include "tensor_timeline.hpp"
#include "workload.hpp"

#include <vector>

namespace fragless::bench {

namespace {
constexpr std::uint64_t requests = 3;
}  // namespace

traces::trace generate_kv_cache_inference(const workload_spec& spec) {
  return write_workload(format_workload_spec(spec), 1, spec.seed, [&](tensor_timeline& tl, workload_random& random) {
    const std::uint64_t H = spec.model, L = spec.layers, B = spec.batch;
    const std::uint64_t heads = H / 64 == 0 ? 1 : H / 64;

    tl.tensor(bf16, {vocabulary, H});
    for (std::uint64_t l = 0; l < L; ++l) {
      for (std::uint64_t size : {H, H, 3 * H * H, 3 * H, H * H, H, H, H, 4 * H * H, 4 * H, 4 * H * H, H}) {
        tl.tensor(bf16, {size});
      }
    }
    for (std::uint64_t request = 0; request < requests; ++request) {
      const std::uint64_t prompt = random.between(spec.sequence / 4 == 0 ? 1 : spec.sequence / 4, spec.sequence);
      std::vector<std::uint64_t> keys(L), values(L);
      // Prefill over the prompt.
      std::uint64_t x = tl.tensor(bf16, {B, prompt, H});
      for (std::uint64_t l = 0; l < L; ++l) {
        const std::uint64_t ln = tl.tensor(bf16, {B, prompt, H});
        const std::uint64_t qkv = tl.tensor(bf16, {B, prompt, 3 * H});
        tl.free(ln);
        keys[l] = tl.tensor(bf16, {B, heads, prompt, 64});
        values[l] = tl.tensor(bf16, {B, heads, prompt, 64});
        const std::uint64_t attention = tl.tensor(bf16, {B, prompt, H});
        tl.free(qkv);
        const std::uint64_t fc1 = tl.tensor(bf16, {B, prompt, 4 * H});
        tl.scratch(bf16, {B, prompt, 4 * H});
        tl.free(attention);
        tl.free(fc1);
        const std::uint64_t next = tl.tensor(bf16, {B, prompt, H});
        tl.free(x);
        x = next;
      }
      tl.scratch(fp32, {B, vocabulary});
      tl.free(x);
      // Decode one token at a time.
      for (std::uint64_t token = 0; token < spec.steps; ++token) {
        const std::uint64_t length = prompt + token + 1;
        std::uint64_t h = tl.tensor(bf16, {B, 1, H});
        for (std::uint64_t l = 0; l < L; ++l) {
          const std::uint64_t qkv = tl.tensor(bf16, {B, 1, 3 * H});
          const std::uint64_t new_keys = tl.tensor(bf16, {B, heads, length, 64});
          tl.free(keys[l]);
          keys[l] = new_keys;
          const std::uint64_t new_values = tl.tensor(bf16, {B, heads, length, 64});
          tl.free(values[l]);
          values[l] = new_values;
          tl.scratch(fp32, {B, heads, 1, length});  // attention scores
          tl.free(qkv);
          tl.scratch(bf16, {B, 1, 4 * H});
          const std::uint64_t next = tl.tensor(bf16, {B, 1, H});
          tl.free(h);
          h = next;
        }
        tl.scratch(fp32, {B, vocabulary});  // logits
        tl.scratch(8, {B});                 // sampled token ids
        tl.free(h);
      }
      for (std::uint64_t l = 0; l < L; ++l) {
        tl.free(keys[l]);
        tl.free(values[l]);
      }
    }
  });
}

}  // namespace fragless::bench
