// corpus_training_families: the training-loop families of the generated corpus -- few huge
// tensors of varying size, dynamic shapes, activation recomputation, pipeline-parallel
// 1F1B micro-batches, long-lived parameters and optimizer state under short-lived
// activations. Each is a loop of 3 to 6 steps; shapes are drawn per seed and per step.
// Invariant: every step frees what it allocated except the state the family keeps across
// steps (weights, optimizer state, gradients accumulated between optimizer steps).
#include "corpus.hpp"
#include "tensor_timeline.hpp"

#include <algorithm>
#include <vector>

namespace fragless::bench {

namespace {

// A small temporary between big ones (an index tensor, a reduction's scratch).
void small_temporaries(tensor_timeline& tl, workload_random& random, std::uint64_t most) {
  const std::uint64_t count = random.between(0, most);
  for (std::uint64_t i = 0; i < count; ++i) tl.free(tl.bytes(random.log_uniform(512, mib)));
}

}  // namespace

// Few, very large tensors whose sizes change from step to step (volumetric models:
// 3-D grids, octrees): a handful of slots of 64 MiB..4 GiB, each step's size 0.5x..1.5x
// the slot's base, some freed early, the rest in reverse order after the step's peak.
traces::trace generate_huge_tensors(const std::string& name, std::uint64_t seed) {
  return write_workload(name, 1, seed, [&](tensor_timeline& tl, workload_random& random) {
    const std::uint64_t params = random.between(1, 4);
    for (std::uint64_t i = 0; i < params; ++i) tl.bytes(random.log_uniform(mib, 1024 * mib));
    std::vector<std::uint64_t> base(random.between(3, 10));
    for (std::uint64_t& b : base) b = random.log_uniform(64 * mib, corpus_max_block_bytes);
    const std::uint64_t steps = random.between(3, 6);
    for (std::uint64_t step = 0; step < steps; ++step) {
      std::vector<std::uint64_t> live;
      for (std::uint64_t b : base) {
        live.push_back(tl.bytes(std::min(corpus_max_block_bytes, b / 100 * random.between(50, 150))));
        small_temporaries(tl, random, 6);
        if (live.size() > 1 && random.chance(30)) {  // an input consumed early
          const std::size_t victim = random.between(0, live.size() - 2);
          tl.free(live[victim]);
          live.erase(live.begin() + static_cast<std::ptrdiff_t>(victim));
        }
      }
      // Backward-like: a gradient the size of a live block, then the block goes.
      while (!live.empty()) {
        const std::uint64_t grad = random.chance(50) ? tl.bytes(random.log_uniform(mib, 512 * mib)) : 0;
        tl.free(live.back());
        live.pop_back();
        small_temporaries(tl, random, 3);
        if (grad != 0) tl.free(grad);
      }
    }
  });
}

// Variable batch and sequence length per step (a transformer trained on unpadded data):
// hidden width and depth per seed, B x S per step from wide ranges.
traces::trace generate_dynamic_shapes(const std::string& name, std::uint64_t seed) {
  return write_workload(name, 1, seed, [&](tensor_timeline& tl, workload_random& random) {
    const std::uint64_t H = 64 * random.log_uniform(4, 128);
    const std::uint64_t L = random.between(2, 12);
    for (std::uint64_t l = 0; l < L; ++l) {
      tl.tensor(bf16, {3 * H, H});
      tl.tensor(bf16, {H, H});
      tl.tensor(bf16, {4 * H, H});
      tl.tensor(bf16, {H, 4 * H});
    }
    const std::uint64_t steps = random.between(3, 6);
    for (std::uint64_t step = 0; step < steps; ++step) {
      const std::uint64_t B = random.log_uniform(1, 64);
      const std::uint64_t S = (random.log_uniform(16, 8192) + 7) / 8 * 8;
      std::vector<std::vector<std::uint64_t>> saved(L);
      std::uint64_t x = tl.tensor(bf16, {B, S, H});
      for (std::uint64_t l = 0; l < L; ++l) {
        saved[l].push_back(tl.tensor(bf16, {B, S, 3 * H}));
        saved[l].push_back(tl.tensor(fp32, {B, S}));
        tl.scratch(bf16, {B, S, H});
        saved[l].push_back(tl.tensor(bf16, {B, S, 4 * H}));
        saved[l].push_back(x);
        x = tl.tensor(bf16, {B, S, H});
      }
      std::uint64_t grad = tl.tensor(bf16, {B, S, H});
      tl.free(x);
      for (std::uint64_t l = L; l-- > 0;) {
        const std::uint64_t weight_grad = tl.tensor(bf16, {4 * H, H});
        tl.scratch(bf16, {B, S, 4 * H});
        const std::uint64_t next = tl.tensor(bf16, {B, S, H});
        tl.free(grad);
        grad = next;
        for (std::uint64_t id : saved[l]) tl.free(id);
        tl.free(weight_grad);
      }
      tl.free(grad);
    }
  });
}

// Activation checkpointing: forward keeps only each segment's input; backward recomputes a
// segment's activations, then frees them while its gradients are made.
traces::trace generate_activation_recompute(const std::string& name, std::uint64_t seed) {
  return write_workload(name, 1, seed, [&](tensor_timeline& tl, workload_random& random) {
    const std::uint64_t H = 64 * random.log_uniform(4, 96);
    const std::uint64_t L = random.between(4, 24);
    const std::uint64_t segment = random.between(1, 4);
    for (std::uint64_t l = 0; l < L; ++l) tl.tensor(bf16, {12 * H, H});
    const std::uint64_t steps = random.between(3, 6);
    auto layer_activations = [&](std::uint64_t B, std::uint64_t S, std::vector<std::uint64_t>& out) {
      out.push_back(tl.tensor(bf16, {B, S, 3 * H}));
      out.push_back(tl.tensor(fp32, {B, S}));
      out.push_back(tl.tensor(bf16, {B, S, 4 * H}));
      out.push_back(tl.tensor(bf16, {B, S, H}));
    };
    for (std::uint64_t step = 0; step < steps; ++step) {
      const std::uint64_t B = random.log_uniform(1, 32);
      const std::uint64_t S = (random.log_uniform(128, 8192) + 63) / 64 * 64;
      std::vector<std::uint64_t> checkpoints;
      std::uint64_t x = tl.tensor(bf16, {B, S, H});
      for (std::uint64_t l = 0; l < L; ++l) {
        if (l % segment == 0) checkpoints.push_back(x);
        std::vector<std::uint64_t> discarded;
        layer_activations(B, S, discarded);
        const std::uint64_t next = tl.tensor(bf16, {B, S, H});
        for (std::uint64_t id : discarded) tl.free(id);
        if (l % segment != 0) tl.free(x);
        x = next;
      }
      std::uint64_t grad = tl.tensor(bf16, {B, S, H});
      tl.free(x);
      for (std::size_t c = checkpoints.size(); c-- > 0;) {
        const std::uint64_t first = c * segment, last = std::min(L, first + segment);
        std::vector<std::vector<std::uint64_t>> recomputed(last - first);
        for (std::uint64_t l = first; l < last; ++l) layer_activations(B, S, recomputed[l - first]);
        for (std::uint64_t l = last; l-- > first;) {
          const std::uint64_t weight_grad = tl.tensor(bf16, {12 * H, H});
          const std::uint64_t next = tl.tensor(bf16, {B, S, H});
          tl.free(grad);
          grad = next;
          for (std::uint64_t id : recomputed[l - first]) tl.free(id);
          tl.free(weight_grad);
        }
        tl.free(checkpoints[c]);
      }
      tl.free(grad);
    }
  });
}

// One rank of a pipeline-parallel schedule, 1F1B: (stages - rank - 1) warm-up forwards,
// then one forward and one backward alternating, then the cool-down backwards. Each
// micro-batch keeps its activations until its backward; sends and receives run on a
// communication stream (stream 1).
traces::trace generate_pipeline_1f1b(const std::string& name, std::uint64_t seed) {
  return write_workload(name, 2, seed, [&](tensor_timeline& tl, workload_random& random) {
    const std::uint64_t stages = random.between(2, 8);
    const std::uint64_t rank = random.between(0, stages - 1);
    const std::uint64_t H = 64 * random.log_uniform(8, 128);
    const std::uint64_t layers = random.between(1, 8);
    for (std::uint64_t l = 0; l < layers; ++l) tl.tensor(bf16, {12 * H, H});
    std::vector<std::uint64_t> weight_grads;
    const std::uint64_t steps = random.between(3, 5);
    for (std::uint64_t step = 0; step < steps; ++step) {
      const std::uint64_t micro_batches = random.between(stages, 4 * stages);
      const std::uint64_t B = random.log_uniform(1, 16);
      const std::uint64_t S = (random.log_uniform(256, 8192) + 63) / 64 * 64;
      std::vector<std::vector<std::uint64_t>> saved(micro_batches);
      std::uint64_t pending_send = 0;
      auto finish_send = [&] {
        if (pending_send != 0) tl.free(pending_send);
        pending_send = 0;
      };
      auto forward = [&](std::uint64_t mb) {
        const std::uint64_t input = tl.tensor(bf16, {B, S, H}, 1);  // received activations
        saved[mb].push_back(input);
        for (std::uint64_t l = 0; l < layers; ++l) {
          saved[mb].push_back(tl.tensor(bf16, {B, S, 3 * H}));
          saved[mb].push_back(tl.tensor(bf16, {B, S, 4 * H}));
          tl.scratch(bf16, {B, S, H});
        }
        finish_send();
        pending_send = tl.tensor(bf16, {B, S, H}, 1);
      };
      auto backward = [&](std::uint64_t mb) {
        const std::uint64_t grad_in = tl.tensor(bf16, {B, S, H}, 1);
        for (std::uint64_t l = layers; l-- > 0;) {
          if (weight_grads.size() < layers) weight_grads.push_back(tl.tensor(bf16, {12 * H, H}));
          tl.scratch(bf16, {B, S, 4 * H});
        }
        for (std::uint64_t id : saved[mb]) tl.free(id);
        saved[mb].clear();
        tl.free(grad_in);
        finish_send();
        pending_send = tl.tensor(bf16, {B, S, H}, 1);
      };
      const std::uint64_t warmup = std::min(stages - rank - 1, micro_batches);
      std::uint64_t next_forward = 0, next_backward = 0;
      for (; next_forward < warmup; ++next_forward) forward(next_forward);
      while (next_forward < micro_batches) {
        forward(next_forward++);
        backward(next_backward++);
      }
      while (next_backward < micro_batches) backward(next_backward++);
      finish_send();
      // Optimizer step: gradients are zeroed (set to None) every other step.
      if (random.chance(50)) {
        for (std::uint64_t id : weight_grads) tl.free(id);
        weight_grads.clear();
      }
    }
  });
}

// Many parameters of log-uniform size, their gradients made during backward and kept to
// the optimizer step, Adam state created at the first step and kept, and short-lived
// activations in between (counts and lifetimes drawn per step).
traces::trace generate_params_optimizer(const std::string& name, std::uint64_t seed) {
  return write_workload(name, 1, seed, [&](tensor_timeline& tl, workload_random& random) {
    std::vector<std::uint64_t> param_sizes(random.between(20, 300));
    for (std::uint64_t& size : param_sizes) size = random.log_uniform(512, 256 * mib);
    for (std::uint64_t size : param_sizes) tl.bytes(size);
    bool have_state = false;
    const std::uint64_t steps = random.between(3, 6);
    for (std::uint64_t step = 0; step < steps; ++step) {
      // Forward: activations with LIFO-ish lifetimes, some freed early.
      std::vector<std::uint64_t> activations;
      const std::uint64_t count = random.between(20, 300);
      const std::uint64_t largest = random.log_uniform(mib, 1024 * mib);
      for (std::uint64_t i = 0; i < count; ++i) {
        activations.push_back(tl.bytes(random.log_uniform(512, largest)));
        if (random.chance(40)) tl.free(tl.bytes(random.log_uniform(512, largest)));
        if (activations.size() > 2 && random.chance(15)) {
          const std::size_t victim = random.between(0, activations.size() - 2);
          tl.free(activations[victim]);
          activations.erase(activations.begin() + static_cast<std::ptrdiff_t>(victim));
        }
      }
      // Backward: gradients in reverse parameter order, activations going.
      std::vector<std::uint64_t> grads;
      for (std::size_t p = param_sizes.size(); p-- > 0;) {
        grads.push_back(tl.bytes(param_sizes[p]));
        if (!activations.empty() && random.chance(60)) {
          tl.free(activations.back());
          activations.pop_back();
        }
      }
      for (std::uint64_t id : activations) tl.free(id);
      // Optimizer step.
      if (!have_state) {
        for (std::uint64_t size : param_sizes) {
          tl.bytes(size);
          tl.bytes(size);
        }
        have_state = true;
      }
      tl.scratch(fp32, {random.log_uniform(1, 64 * mib)});  // a fused-Adam workspace
      for (std::uint64_t id : grads) tl.free(id);
    }
  });
}

}  // namespace fragless::bench
