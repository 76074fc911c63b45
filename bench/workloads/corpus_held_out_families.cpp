// corpus_held_out_families: families added to the generated corpus after the placement
// policy was settled, and measured before any change to it (Note [Held-out families]) --
// sharded data parallelism (FSDP / ZeRO-3), U-Nets at a resolution drawn per step (2-D and
// volumetric), and attention inference over requests of varying length with quantized
// weights. Each is a loop of 3 to 6 steps; shapes are drawn per seed and per step.
// Invariant: whatever is live at the end of a step is state the family keeps on purpose
// (parameter shards and optimizer state, weights).
#include "corpus.hpp"
#include "tensor_timeline.hpp"

#include <algorithm>
#include <vector>

namespace fragless::bench {

// Note [Held-out families]
// The first eight families were the ones the policy was developed against: their seeds
// were replayed thousands of times while rules were tried and kept. A family written
// after that is a workload nobody tuned for, the kind the policy is finally judged on, so
// these three were added to the corpus as they are, their first replay's figures reported
// as measured (README, "corpus per family"), and any later change to the policy that
// they motivate is to be said so where it is described. Each models a common program
// whose allocation pattern the first eight do not cover.

// Sharded data parallelism (FSDP, ZeRO-3), one rank of `world`: each unit's parameters
// are kept as a 1/world shard (bf16, with fp32 master weights and Adam state, and an fp32
// gradient shard from the first backward on) and all-gathered into a full-size buffer on a
// communication stream (stream 1) just before the unit runs, the next unit's gather
// prefetched; the buffer is freed once the compute stream is done with it. Backward gathers
// again in reverse, makes the unit's full gradient, reduce-scatters it into a shard-size
// buffer on the communication stream and frees the full one. Tokens per step vary.
traces::trace generate_sharded_data_parallel(const std::string& name, std::uint64_t seed) {
  return write_workload(name, 2, seed, [&](tensor_timeline& tl, workload_random& random) {
    const std::uint64_t world = random.log_uniform(2, 64);
    const std::uint64_t H = 64 * random.log_uniform(4, 128);
    const std::uint64_t layers = random.between(2, 24);
    const std::uint64_t saved_per_layer = random.between(3, 8);  // activations kept per token
    // Units: the embedding, the layers (equal), the head (tied or not).
    std::vector<std::uint64_t> unit_bytes;
    unit_bytes.push_back(vocabulary * H * bf16);
    for (std::uint64_t l = 0; l < layers; ++l) unit_bytes.push_back(12 * H * H * bf16);
    if (random.chance(50)) unit_bytes.push_back(vocabulary * H * bf16);
    const std::size_t units = unit_bytes.size();
    std::vector<std::uint64_t> grad_shards;
    for (std::uint64_t bytes : unit_bytes) {
      const std::uint64_t shard = (bytes + world - 1) / world;
      tl.bytes(shard);          // bf16 parameter shard
      tl.bytes(2 * shard);      // fp32 master weights
      tl.bytes(2 * shard);      // Adam exp_avg
      tl.bytes(2 * shard);      // Adam exp_avg_sq
    }
    const std::uint64_t steps = random.between(3, 6);
    for (std::uint64_t step = 0; step < steps; ++step) {
      const std::uint64_t tokens = random.log_uniform(512, 32768);
      std::vector<std::vector<std::uint64_t>> saved(units);
      // Forward, one gather prefetched ahead.
      std::uint64_t gathered = tl.bytes(unit_bytes[0], 1);
      std::uint64_t x = tl.tensor(bf16, {tokens, H});
      for (std::size_t u = 0; u < units; ++u) {
        const std::uint64_t next_gathered = u + 1 < units ? tl.bytes(unit_bytes[u + 1], 1) : 0;
        if (u == 0 || u + 1 == units) {
          tl.scratch(fp32, {tokens, H});  // embedding lookup / logits chunk
        } else {
          for (std::uint64_t k = 0; k < saved_per_layer; ++k)
            saved[u].push_back(tl.tensor(bf16, {tokens, H * random.between(1, 4)}));
          tl.scratch(bf16, {tokens, 4 * H});
        }
        saved[u].push_back(x);
        x = tl.tensor(bf16, {tokens, H});
        tl.free(gathered);
        gathered = next_gathered;
      }
      // Backward in reverse, the previous unit's gather prefetched.
      std::uint64_t grad = tl.tensor(bf16, {tokens, H});
      tl.free(x);
      gathered = tl.bytes(unit_bytes[units - 1], 1);
      std::uint64_t pending_reduce = 0;  // the reduce-scatter still in flight
      for (std::size_t u = units; u-- > 0;) {
        const std::uint64_t prev_gathered = u > 0 ? tl.bytes(unit_bytes[u - 1], 1) : 0;
        const std::uint64_t full_grad = tl.bytes(unit_bytes[u]);
        tl.scratch(bf16, {tokens, 4 * H});
        const std::uint64_t next_grad = tl.tensor(bf16, {tokens, H});
        tl.free(grad);
        grad = next_grad;
        for (std::uint64_t id : saved[u]) tl.free(id);
        if (pending_reduce != 0) tl.free(pending_reduce);
        pending_reduce = tl.bytes((unit_bytes[u] + world - 1) / world * 2, 1);  // fp32 shard
        tl.free(full_grad);
        tl.free(gathered);
        gathered = prev_gathered;
        if (grad_shards.size() < units) grad_shards.push_back(tl.bytes((unit_bytes[u] + world - 1) / world * 2));
      }
      if (pending_reduce != 0) tl.free(pending_reduce);
      tl.free(grad);
      // Optimizer: a foreach step's temporaries, a few shards at a time.
      for (std::size_t u = 0; u < units; ++u) {
        const std::uint64_t shard = (unit_bytes[u] + world - 1) / world;
        const std::uint64_t a = tl.bytes(2 * shard);
        const std::uint64_t b = tl.bytes(2 * shard);
        tl.free(a);
        tl.free(b);
      }
    }
  });
}

// A U-Net (diffusion, segmentation; volumetric for a third of the seeds) at a resolution
// drawn per step: each level halves the resolution and doubles the channels, the encoder's
// outputs are kept as skip connections until the decoder level that concatenates them,
// and the lowest level runs self-attention whose scores grow with the square of its
// positions. Training seeds keep every activation for backward.
traces::trace generate_unet_resolution(const std::string& name, std::uint64_t seed) {
  return write_workload(name, 1, seed, [&](tensor_timeline& tl, workload_random& random) {
    const bool volumetric = random.chance(33);
    const std::uint64_t dims = volumetric ? 3 : 2;
    const std::uint64_t levels = random.between(2, 5);
    const std::uint64_t channels = 32 * random.between(1, 8);
    const std::uint64_t batch = random.log_uniform(1, 16);
    const bool training = random.chance(60);
    const std::uint64_t kernel = dims == 3 ? 27 : 9;
    for (std::uint64_t l = 0; l <= levels; ++l) {
      const std::uint64_t c = channels << l;
      tl.bytes(2 * c * c * kernel * bf16);  // encoder convolutions
      tl.bytes(3 * c * c * kernel * bf16);  // decoder convolutions (concatenated input)
    }
    auto volume = [&](std::uint64_t side) {
      std::uint64_t v = 1;
      for (std::uint64_t d = 0; d < dims; ++d) v *= side;
      return v;
    };
    const std::uint64_t steps = random.between(3, 6);
    for (std::uint64_t step = 0; step < steps; ++step) {
      const std::uint64_t multiple = std::uint64_t{1} << levels;
      const std::uint64_t side =
          (volumetric ? random.log_uniform(16, 192) : random.log_uniform(64, 1024)) / multiple * multiple + multiple;
      struct kept {
        std::uint64_t id, bytes;
      };
      std::vector<kept> saved, skips;
      // An activation at `level` with `channel_factor` x that level's channels.
      auto activation = [&](std::uint64_t level, std::uint64_t channel_factor) {
        const std::uint64_t bytes = batch * (channels << level) * channel_factor * volume(side >> level) * bf16;
        return kept{tl.bytes(bytes), bytes};
      };
      // Inference frees what training keeps for backward.
      auto done_with = [&](const kept& k) {
        if (training) saved.push_back(k);
        else tl.free(k.id);
      };
      kept x = activation(0, 1);
      for (std::uint64_t l = 0; l < levels; ++l) {  // encoder
        const kept h = activation(l, 1);
        skips.push_back(activation(l, 1));
        done_with(h);
        done_with(x);
        x = activation(l + 1, 1);  // downsampled
      }
      // Lowest level: attention over its positions.
      const std::uint64_t positions = volume(side >> levels);
      const kept qkv = activation(levels, 3);
      const std::uint64_t score_bytes =
          std::min(batch * positions * positions * fp32, corpus_max_block_bytes);
      const kept scores{tl.bytes(score_bytes), score_bytes};
      const kept attended = activation(levels, 1);
      done_with(scores);
      done_with(qkv);
      done_with(x);
      x = attended;
      for (std::uint64_t l = levels; l-- > 0;) {  // decoder: upsample, concatenate the skip
        const kept up = activation(l, 2);
        const kept cat = activation(l, 3);
        tl.free(up.id);
        tl.free(skips.back().id);
        skips.pop_back();
        const kept out = activation(l, 1);
        done_with(cat);
        done_with(x);
        x = out;
      }
      tl.free(x.id);
      if (!training) continue;
      // Backward: each saved activation's gradient, in reverse, the activation going with it.
      kept grad = activation(0, 1);
      for (std::size_t i = saved.size(); i-- > 0;) {
        const kept next{tl.bytes(saved[i].bytes), saved[i].bytes};
        if (random.chance(30)) tl.free(tl.bytes(saved[i].bytes));  // a convolution's workspace
        tl.free(grad.id);
        grad = next;
        tl.free(saved[i].id);
      }
      tl.free(grad.id);
    }
  });
}

// Attention inference over batches of requests of varying length, weights quantized to
// int8 with per-row fp32 scales: each layer dequantizes a weight into a bf16 temporary for
// some kernels, and a seed without a fused attention kernel materializes the scores
// (batch x heads x length^2 in fp32) and their softmax. Several batches per step, each of
// a length and size of its own.
traces::trace generate_quantized_attention(const std::string& name, std::uint64_t seed) {
  return write_workload(name, 1, seed, [&](tensor_timeline& tl, workload_random& random) {
    const std::uint64_t head_dim = 64 * random.between(1, 2);
    const std::uint64_t heads = random.log_uniform(4, 64);
    const std::uint64_t H = heads * head_dim;
    const std::uint64_t layers = random.between(2, 32);
    const bool fused_attention = random.chance(50);
    const std::uint64_t dequantize_percent = random.between(0, 100);
    std::vector<std::uint64_t> matrix_rows = {3 * H, H, 4 * H, H};
    std::vector<std::uint64_t> matrix_columns = {H, H, H, 4 * H};
    for (std::uint64_t l = 0; l < layers; ++l) {
      for (std::size_t m = 0; m < matrix_rows.size(); ++m) {
        tl.bytes(matrix_rows[m] * matrix_columns[m]);  // int8 weight
        tl.tensor(fp32, {matrix_rows[m]});             // its scales
      }
    }
    tl.tensor(bf16, {vocabulary, H});
    const std::uint64_t steps = random.between(3, 6);
    for (std::uint64_t step = 0; step < steps; ++step) {
      const std::uint64_t batches = random.between(1, 6);
      for (std::uint64_t b = 0; b < batches; ++b) {
        const std::uint64_t length = random.log_uniform(16, 8192);
        // Unfused scores stay within the largest block a program would make.
        const std::uint64_t most_requests =
            fused_attention ? 64 : std::clamp<std::uint64_t>(corpus_max_block_bytes / (heads * length * length * fp32), 1, 64);
        const std::uint64_t requests = random.log_uniform(1, most_requests);
        const std::uint64_t tokens = requests * length;
        std::uint64_t x = tl.tensor(bf16, {tokens, H});
        for (std::uint64_t l = 0; l < layers; ++l) {
          auto project = [&](std::size_t m) {
            const bool dequantized = random.between(1, 100) <= dequantize_percent;
            const std::uint64_t weight = dequantized ? tl.tensor(bf16, {matrix_rows[m], matrix_columns[m]}) : 0;
            const std::uint64_t out = tl.tensor(bf16, {tokens, matrix_rows[m]});
            if (weight != 0) tl.free(weight);
            return out;
          };
          const std::uint64_t qkv = project(0);
          std::uint64_t attended = 0;
          if (fused_attention) {
            attended = tl.tensor(bf16, {tokens, H});
          } else {
            const std::uint64_t scores = tl.tensor(fp32, {requests * heads, length, length});
            const std::uint64_t probabilities = tl.tensor(bf16, {requests * heads, length, length});
            tl.free(scores);
            attended = tl.tensor(bf16, {tokens, H});
            tl.free(probabilities);
          }
          tl.free(qkv);
          const std::uint64_t projected = project(1);
          tl.free(attended);
          const std::uint64_t hidden = project(2);
          tl.free(projected);
          const std::uint64_t out = project(3);
          tl.free(hidden);
          tl.free(x);
          x = out;
        }
        tl.scratch(fp32, {requests, vocabulary});  // logits of each request's last token
        tl.free(x);
      }
    }
  });
}

}  // namespace fragless::bench
