// corpus_second_wave_families: the second wave of held-out families (Note [Second held-out
// wave]) -- reinforcement learning from feedback (a PPO loop alternating generation,
// scoring and training of four models), a server swapping models and adapters in and out
// of a memory budget, and graph neural network training over sampled subgraphs. Each is a
// loop of 3 to 6 steps; shapes are drawn per seed and per step.
// Invariant: whatever is live at the end of a step is state the family keeps on purpose
// (weights, optimizer state, the models resident in the server's budget).
#include "corpus.hpp"
#include "corpus_layers.hpp"
#include "tensor_timeline.hpp"

#include <algorithm>
#include <vector>

namespace fragless::bench {

// Note [Second held-out wave]
// Like the first three held-out families (Note [Held-out families]), these were written
// after the placement policy had been settled and were added to the corpus as they are:
// their first replay's figures are reported as measured (README, "The second held-out
// wave"), before any change they might motivate. They model what none of the other
// families does: long-lived blocks that come and go (a server's models and adapters,
// where every other family keeps its weights for good), a loop whose step is three
// phases of different shapes (generation, scoring, training), and sizes drawn from a
// heavy tail every step (sampled subgraphs, whose edge counts vary by orders of
// magnitude).


// PPO from feedback on one GPU: an actor and a critic trained (bf16 weights, fp32 master
// weights, Adam state from their first update, gradients freed after each), a frozen
// reference and reward model. Each step generates responses of a drawn length for a batch
// of prompts (KV caches grown the eager way, a chunk of tokens at a time), scores them
// with all four models, then trains actor and critic over the experience for a drawn
// number of epochs and minibatches, activations kept for backward.
traces::trace generate_rlhf_ppo(const std::string& name, std::uint64_t seed) {
  return write_workload(name, 1, seed, [&](tensor_timeline& tl, workload_random& random) {
    const std::uint64_t h = 64 * random.log_uniform(4, 64);
    const std::uint64_t actor_layers = random.between(2, 24);
    const std::uint64_t critic_layers = random.between(2, actor_layers);
    const std::uint64_t growth_tokens = random.log_uniform(8, 128);  // KV cache regrown per chunk
    const std::uint64_t saved_per_layer = random.between(2, 4);
    struct model {
      std::uint64_t layers;
      bool trained;
      std::vector<std::uint64_t> weight_bytes;
      std::vector<std::uint64_t> gradients, adam_state;
    };
    std::vector<model> models = {{actor_layers, true, {}, {}, {}},
                                 {critic_layers, true, {}, {}, {}},
                                 {actor_layers, false, {}, {}, {}},
                                 {critic_layers, false, {}, {}, {}}};
    for (model& m : models) {
      m.weight_bytes.push_back(vocabulary * h * bf16);
      for (std::uint64_t l = 0; l < m.layers; ++l)
        for (const matrix_shape& s : layer_matrices(h)) m.weight_bytes.push_back(s.rows * s.columns * bf16);
      for (std::uint64_t bytes : m.weight_bytes) {
        tl.bytes(bytes);
        if (m.trained) tl.bytes(2 * bytes);  // fp32 master weights
      }
    }
    const std::uint64_t steps = random.between(3, 6);
    for (std::uint64_t step = 0; step < steps; ++step) {
      const std::uint64_t batch = random.log_uniform(1, 64);
      const std::uint64_t prompt = random.log_uniform(16, 1024);
      const std::uint64_t response = random.log_uniform(16, 512);
      const std::uint64_t total = prompt + response;
      // Generation: the actor's KV caches, one per layer for keys and values.
      std::vector<std::uint64_t> caches;
      for (std::uint64_t l = 0; l < 2 * actor_layers; ++l) caches.push_back(tl.bytes(capped(batch * prompt * h * bf16)));
      forward_without_grad(tl, batch * prompt, h, actor_layers, forward_layer::attention_and_mlp);  // prefill
      for (std::uint64_t t = 0; t < response; ++t) {
        tl.scratch(fp32, {batch, vocabulary});  // logits of the next token
        if ((t + 1) % growth_tokens != 0 && t + 1 != response) continue;
        for (std::uint64_t& cache : caches) {
          const std::uint64_t grown = tl.bytes(capped(batch * (prompt + t + 1) * h * bf16));
          tl.free(cache);
          cache = grown;
        }
      }
      for (std::uint64_t cache : caches) tl.free(cache);
      // Scoring: old log-probabilities, reference log-probabilities, values, rewards.
      std::vector<std::uint64_t> experience;
      experience.push_back(tl.tensor(int64_bytes, {batch, total}));  // the sequences
      for (const model& m : models) {
        forward_without_grad(tl, batch * total, h, m.layers, forward_layer::attention_and_mlp);
        experience.push_back(tl.tensor(fp32, {batch, response}));
      }
      const std::uint64_t advantages = tl.tensor(fp32, {batch, response});
      tl.scratch(fp32, {batch, response});  // discounted returns
      experience.push_back(advantages);
      // Training: epochs over minibatches, actor then critic, each followed by its update.
      const std::uint64_t epochs = random.between(1, 2);
      const std::uint64_t minibatch = std::max<std::uint64_t>(1, batch / random.between(1, 2));
      for (std::uint64_t epoch = 0; epoch < epochs; ++epoch) {
        for (std::uint64_t done = 0; done < batch; done += minibatch) {
          const std::uint64_t tokens = std::min(minibatch, batch - done) * total;
          for (std::size_t which = 0; which < 2; ++which) {
            model& m = models[which];
            std::vector<std::uint64_t> saved;
            std::uint64_t x = tl.bytes(capped(tokens * h * bf16));
            for (std::uint64_t l = 0; l < m.layers; ++l) {
              for (std::uint64_t k = 0; k < saved_per_layer; ++k)
                saved.push_back(tl.bytes(capped(tokens * h * random.between(1, 4) * bf16)));
              saved.push_back(x);
              x = tl.bytes(capped(tokens * h * bf16));
            }
            tl.free(tl.bytes(capped(tokens * (which == 0 ? vocabulary : 1) * fp32)));  // the head's output
            std::uint64_t grad = tl.bytes(capped(tokens * h * bf16));
            tl.free(x);
            for (std::size_t i = saved.size(); i-- > 0;) {
              if (i % (saved_per_layer + 1) == 0 && m.gradients.size() < m.weight_bytes.size()) {
                // Gradients appear layer by layer in backward, four matrices at a time.
                for (std::size_t g = 0; g < 4 && m.gradients.size() < m.weight_bytes.size(); ++g)
                  m.gradients.push_back(tl.bytes(m.weight_bytes[m.weight_bytes.size() - 1 - m.gradients.size()]));
              }
              const std::uint64_t next = tl.bytes(capped(tokens * h * bf16));
              tl.free(grad);
              grad = next;
              tl.free(saved[i]);
            }
            tl.free(grad);
            while (m.gradients.size() < m.weight_bytes.size())
              m.gradients.push_back(tl.bytes(m.weight_bytes[m.weight_bytes.size() - 1 - m.gradients.size()]));
            // The update: Adam state on the first one, a foreach temporary per tensor.
            for (std::uint64_t bytes : m.weight_bytes) {
              if (m.adam_state.size() < 2 * m.weight_bytes.size()) {
                m.adam_state.push_back(tl.bytes(2 * bytes));
                m.adam_state.push_back(tl.bytes(2 * bytes));
              }
              tl.free(tl.bytes(2 * bytes));
            }
            for (std::uint64_t g : m.gradients) tl.free(g);
            m.gradients.clear();
          }
        }
      }
      for (std::uint64_t id : experience) tl.free(id);
    }
  });
}

// A server with several models (2..6, int8 weights with fp32 scales on some) and a memory
// budget for their weights smaller than all of them: a request for a model that is not
// resident evicts the least recently used ones until it fits, then loads it tensor by
// tensor (some through a staging buffer converted on the device). Requests of a drawn
// batch and length, some with a low-rank adapter loaded for them and freed after; the
// most popular models get most of the requests.
traces::trace generate_model_swap(const std::string& name, std::uint64_t seed) {
  return write_workload(name, 1, seed, [&](tensor_timeline& tl, workload_random& random) {
    struct model {
      std::uint64_t h, layers;
      bool quantized;
      std::vector<std::uint64_t> weight_bytes;
      std::vector<std::uint64_t> resident;  // ids of its live weights (empty: not resident)
      std::uint64_t last_used = 0;
      std::uint64_t total_bytes() const {
        std::uint64_t sum = 0;
        for (std::uint64_t b : weight_bytes) sum += b;
        return sum;
      }
    };
    const std::uint64_t count = random.between(2, 6);
    std::vector<model> models(count);
    std::uint64_t all_bytes = 0, largest_bytes = 0;
    for (model& m : models) {
      m.h = 64 * random.log_uniform(4, 64);
      m.layers = random.between(2, 32);
      m.quantized = random.chance(30);
      m.weight_bytes.push_back(vocabulary * m.h * bf16);
      for (std::uint64_t l = 0; l < m.layers; ++l) {
        for (const matrix_shape& s : layer_matrices(m.h)) {
          m.weight_bytes.push_back(s.rows * s.columns * (m.quantized ? 1 : bf16));
          if (m.quantized) m.weight_bytes.push_back(s.rows * fp32);  // per-row scales
        }
      }
      all_bytes += m.total_bytes();
      largest_bytes = std::max(largest_bytes, m.total_bytes());
    }
    const std::uint64_t budget_bytes = std::max(largest_bytes, all_bytes * random.between(30, 90) / 100);
    const bool staged_loads = random.chance(50);
    std::uint64_t resident_bytes = 0, clock = 0;
    const std::uint64_t steps = random.between(3, 6);
    for (std::uint64_t step = 0; step < steps; ++step) {
      const std::uint64_t requests = random.between(4, 16);
      for (std::uint64_t r = 0; r < requests; ++r) {
        // Popularity falls off: model i is picked about twice as often as model i + 1.
        std::size_t pick = 0;
        while (pick + 1 < count && random.chance(50)) ++pick;
        model& m = models[pick];
        m.last_used = ++clock;
        if (m.resident.empty()) {
          while (resident_bytes + m.total_bytes() > budget_bytes) {
            model* victim = nullptr;
            for (model& other : models)
              if (!other.resident.empty() && (victim == nullptr || other.last_used < victim->last_used)) victim = &other;
            if (victim == nullptr) break;
            for (std::uint64_t id : victim->resident) tl.free(id);
            victim->resident.clear();
            resident_bytes -= victim->total_bytes();
          }
          for (std::uint64_t bytes : m.weight_bytes) {
            const std::uint64_t staging = staged_loads ? tl.bytes(bytes) : 0;  // as read, before conversion
            m.resident.push_back(tl.bytes(bytes));
            if (staging != 0) tl.free(staging);
          }
          resident_bytes += m.total_bytes();
        }
        const std::uint64_t batch = random.log_uniform(1, 32);
        const std::uint64_t length = random.log_uniform(16, 4096);
        std::vector<std::uint64_t> adapter;
        if (random.chance(40)) {
          const std::uint64_t rank = random.log_uniform(8, 64);
          for (std::uint64_t l = 0; l < m.layers; ++l)
            for (const matrix_shape& s : layer_matrices(m.h)) {
              adapter.push_back(tl.tensor(bf16, {rank, s.columns}));
              adapter.push_back(tl.tensor(bf16, {s.rows, rank}));
            }
        }
        if (m.quantized) {  // a dequantized temporary for the first layer's kernels
          const matrix_shape s = layer_matrices(m.h)[0];
          tl.scratch(bf16, {s.rows, s.columns});
        }
        forward_without_grad(tl, batch * length, m.h, m.layers, forward_layer::attention_and_mlp);
        tl.scratch(fp32, {batch, vocabulary});
        for (std::uint64_t id : adapter) tl.free(id);
      }
    }
  });
}

// Graph neural network training over sampled subgraphs (GraphSAGE / GAT style): each step
// samples a subgraph whose node and edge counts are drawn from heavy tails, gathers its
// node features, and runs message-passing layers that materialize per-edge messages
// (edges x width), scatter them into the nodes, and keep what backward needs; backward
// makes the same per-edge tensors again. Weights and Adam state are small.
traces::trace generate_graph_batches(const std::string& name, std::uint64_t seed) {
  return write_workload(name, 1, seed, [&](tensor_timeline& tl, workload_random& random) {
    const std::uint64_t features = random.log_uniform(16, 1024);
    const std::uint64_t width = random.log_uniform(32, 1024);
    const std::uint64_t layers = random.between(2, 6);
    const bool attention = random.chance(40);  // per-edge attention coefficients
    const std::uint64_t weight_bytes = (features + layers * width) * width * fp32;
    tl.bytes(weight_bytes);
    tl.bytes(weight_bytes);  // Adam exp_avg
    tl.bytes(weight_bytes);  // Adam exp_avg_sq
    const std::uint64_t steps = random.between(3, 6);
    for (std::uint64_t step = 0; step < steps; ++step) {
      const std::uint64_t batches = random.between(1, 4);
      for (std::uint64_t b = 0; b < batches; ++b) {
        const std::uint64_t nodes = random.log_uniform(1024, 1 << 20);
        const std::uint64_t edges = nodes * random.log_uniform(2, 64);
        const std::uint64_t edge_index = tl.bytes(capped(2 * edges * int64_bytes));
        std::uint64_t x = tl.bytes(capped(nodes * features * fp32));
        std::vector<std::uint64_t> saved;
        std::uint64_t in_width = features;
        for (std::uint64_t l = 0; l < layers; ++l) {
          const std::uint64_t messages = tl.bytes(capped(edges * in_width * fp32));
          if (attention) saved.push_back(tl.bytes(capped(edges * fp32)));
          const std::uint64_t aggregated = tl.bytes(capped(nodes * in_width * fp32));
          saved.push_back(messages);
          const std::uint64_t out = tl.bytes(capped(nodes * width * fp32));
          saved.push_back(aggregated);
          saved.push_back(x);
          x = out;
          in_width = width;
        }
        tl.scratch(fp32, {nodes, width});  // the loss's per-node terms
        std::uint64_t grad = tl.bytes(capped(nodes * width * fp32));
        tl.free(x);
        for (std::size_t i = saved.size(); i-- > 0;) {
          if (i % (attention ? 4 : 3) == 0) tl.scratch(fp32, {edges, width});  // per-edge gradient
          const std::uint64_t next = tl.bytes(capped(nodes * width * fp32));
          tl.free(grad);
          grad = next;
          tl.free(saved[i]);
        }
        tl.free(grad);
        tl.free(edge_index);
        tl.free(tl.bytes(weight_bytes));  // the gradients, one flat buffer, freed after the update
      }
    }
  });
}

}  // namespace fragless::bench
