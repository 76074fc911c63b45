// transformer_training: GPT-style training steps with variable sequence length.
// Mixed precision as commonly run: fp32 master weights, gradients and AdamW state; bf16
// activations saved for backward (flash attention: no S x S score matrix is kept);
// gradients set to None after each step (PyTorch's default), so they are reallocated in
// every backward; optimizer state created lazily at the first step; a second stream
// carries the next batch's input copy (a data loader with pin_memory / non_blocking).
// Invariant: each step frees everything it allocated except optimizer state and weights.
#include "tensor_timeline.hpp"
#include "workload.hpp"

#include <vector>

namespace fragless::bench {

traces::trace generate_transformer_training(const workload_spec& spec) {
  return write_workload(format_workload_spec(spec), 2, spec.seed, [&](tensor_timeline& tl, workload_random& random) {
    const std::uint64_t H = spec.model, L = spec.layers, B = spec.batch, S_max = spec.sequence;
    const std::uint64_t heads = H / 64 == 0 ? 1 : H / 64;

    // Weights (fp32 master copy), in module order.
    std::vector<std::uint64_t> param_sizes;
    param_sizes.push_back(vocabulary * H * fp32);
    param_sizes.push_back(S_max * H * fp32);
    for (std::uint64_t l = 0; l < L; ++l) {
      for (std::uint64_t size : {H, H, 3 * H * H, 3 * H, H * H, H, H, H, 4 * H * H, 4 * H, 4 * H * H, H}) {
        param_sizes.push_back(size * fp32);
      }
    }
    param_sizes.push_back(H * fp32);
    param_sizes.push_back(H * fp32);
    for (std::uint64_t size : param_sizes) tl.bytes(size);
    std::vector<std::uint64_t> adam_state;  // created at the first step

    for (std::uint64_t step = 0; step < spec.steps; ++step) {
      const std::uint64_t S = (random.between(S_max / 4 == 0 ? 1 : S_max / 4, S_max) + 63) / 64 * 64;
      // Input batch arrives on the copy stream.
      const std::uint64_t input_ids = tl.tensor(int64_bytes, {B, S}, 1);
      const std::uint64_t labels = tl.tensor(int64_bytes, {B, S}, 1);
      std::vector<std::uint64_t> saved;
      saved.push_back(tl.tensor(bf16, {B, S, H}));  // embeddings
      std::vector<std::vector<std::uint64_t>> layer_saved(L);
      for (std::uint64_t l = 0; l < L; ++l) {
        auto& s = layer_saved[l];
        s.push_back(tl.tensor(bf16, {B, S, H}));      // ln1 out
        s.push_back(tl.tensor(fp32, {B, S}));         // ln1 mean
        s.push_back(tl.tensor(fp32, {B, S}));         // ln1 rstd
        s.push_back(tl.tensor(bf16, {B, S, 3 * H}));  // qkv
        s.push_back(tl.tensor(bf16, {B, S, H}));      // attention out
        s.push_back(tl.tensor(fp32, {B, heads, S}));  // logsumexp
        tl.scratch(bf16, {B, S, H});                  // projection out before the residual add
        s.push_back(tl.tensor(1, {B, S, H}));         // dropout mask
        s.push_back(tl.tensor(bf16, {B, S, H}));      // residual 1
        s.push_back(tl.tensor(bf16, {B, S, H}));      // ln2 out
        s.push_back(tl.tensor(fp32, {B, S}));
        s.push_back(tl.tensor(fp32, {B, S}));
        s.push_back(tl.tensor(bf16, {B, S, 4 * H}));  // fc1 out
        s.push_back(tl.tensor(bf16, {B, S, 4 * H}));  // gelu out
        tl.scratch(bf16, {B, S, H});                  // fc2 out
        s.push_back(tl.tensor(1, {B, S, H}));         // dropout mask
        s.push_back(tl.tensor(bf16, {B, S, H}));      // residual 2
      }
      saved.push_back(tl.tensor(bf16, {B, S, H}));           // final ln
      const std::uint64_t logits = tl.tensor(bf16, {B, S, vocabulary});
      const std::uint64_t log_probs = tl.tensor(fp32, {B, S, vocabulary});
      const std::uint64_t loss = tl.tensor(fp32, {1});

      // Backward.
      std::vector<std::uint64_t> grads;
      const std::uint64_t grad_logits = tl.tensor(fp32, {B, S, vocabulary});
      tl.free(log_probs);
      tl.free(logits);
      grads.push_back(tl.bytes(param_sizes[0]));  // tied embedding / LM head
      std::uint64_t grad_x = tl.tensor(bf16, {B, S, H});
      // A layer norm's backward with its residual: the input gradient, then `consumed` goes,
      // the gradients of its weight and bias (parameters `ln` and `ln + 1`), and grad_x is
      // replaced by the sum.
      auto layer_norm_backward = [&](std::uint64_t consumed, std::size_t ln) {
        const std::uint64_t grad_ln = tl.tensor(bf16, {B, S, H});
        tl.free(consumed);
        for (std::size_t p : {ln, ln + 1}) grads.push_back(tl.bytes(param_sizes[p]));
        tl.free(grad_x);
        grad_x = tl.tensor(bf16, {B, S, H});
        tl.free(grad_ln);
      };
      tl.free(grad_logits);
      tl.free(saved.back());
      saved.pop_back();
      grads.push_back(tl.bytes(H * fp32));
      grads.push_back(tl.bytes(H * fp32));
      for (std::uint64_t l = L; l-- > 0;) {
        const std::size_t base = 2 + l * 12;
        // MLP.
        const std::uint64_t grad_gelu = tl.tensor(bf16, {B, S, 4 * H});
        for (std::size_t p : {10u, 11u}) grads.push_back(tl.bytes(param_sizes[base + p]));
        const std::uint64_t grad_fc1 = tl.tensor(bf16, {B, S, 4 * H});
        tl.free(grad_gelu);
        for (std::size_t p : {8u, 9u}) grads.push_back(tl.bytes(param_sizes[base + p]));
        tl.scratch(fp32, {4 * H});  // bias-grad reduction scratch
        layer_norm_backward(grad_fc1, base + 6);
        // Attention.
        const std::uint64_t grad_attn = tl.tensor(bf16, {B, S, H});
        for (std::size_t p : {4u, 5u}) grads.push_back(tl.bytes(param_sizes[base + p]));
        const std::uint64_t grad_qkv = tl.tensor(bf16, {B, S, 3 * H});
        tl.scratch(fp32, {B, heads, S});  // flash-attention backward delta
        tl.free(grad_attn);
        for (std::size_t p : {2u, 3u}) grads.push_back(tl.bytes(param_sizes[base + p]));
        layer_norm_backward(grad_qkv, base);
        for (std::uint64_t id : layer_saved[l]) tl.free(id);
      }
      grads.push_back(tl.bytes(param_sizes[1]));
      tl.free(grad_x);
      for (std::uint64_t id : saved) tl.free(id);
      tl.free(loss);
      tl.free(input_ids);
      tl.free(labels);

      // AdamW (foreach): state at the first step, a scratch per parameter for the update.
      if (adam_state.empty()) {
        for (std::uint64_t size : param_sizes) {
          adam_state.push_back(tl.bytes(size));
          adam_state.push_back(tl.bytes(size));
        }
      }
      for (std::uint64_t size : param_sizes) {
        const std::uint64_t denom = tl.bytes(size);
        tl.scratch(1, {size});
        tl.free(denom);
      }
      for (std::uint64_t id : grads) tl.free(id);  // zero_grad(set_to_none=True)
    }
  });
}

}  // namespace fragless::bench
