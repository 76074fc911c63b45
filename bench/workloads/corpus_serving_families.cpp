// corpus_serving_families: the families of the generated corpus whose allocations are
// shaped by concurrency and routing rather than by a layer loop -- many streams with frees
// far from their allocation, KV-cache growth with eviction, mixture-of-experts routing
// imbalance. Each is a loop of 3 to 6 steps.
// Invariant: whatever is live at the end of a step is state the family keeps on purpose
// (per-stream buffers, caches of requests still running, weights).
#include "corpus.hpp"
#include "tensor_timeline.hpp"

#include <algorithm>
#include <deque>
#include <vector>

namespace fragless::bench {

// Many streams (4..16) issuing work in an interleaved order; each block lives for a drawn
// number of the program's operations, so it is freed while other streams' blocks come and
// go (what record_stream / cross-stream frees look like once replayed at free_completed).
traces::trace generate_many_streams(const std::string& name, std::uint64_t seed) {
  const std::uint64_t streams = workload_random(seed ^ 0x5eed).between(4, 16);
  return write_workload(name, static_cast<std::uint32_t>(streams), seed, [&](tensor_timeline& tl, workload_random& random) {
    for (std::uint64_t s = 0; s < streams; ++s) {
      tl.bytes(random.log_uniform(mib, 256 * mib), static_cast<std::uint32_t>(s));  // per-stream state
    }
    struct pending_free {
      std::uint64_t due;
      std::uint64_t id;
    };
    const std::uint64_t largest = random.log_uniform(16 * mib, corpus_max_block_bytes);
    const std::uint64_t steps = random.between(3, 6);
    for (std::uint64_t step = 0; step < steps; ++step) {
      std::vector<pending_free> pending;
      const std::uint64_t operations = random.between(100, 600);
      for (std::uint64_t op = 0; op < operations; ++op) {
        const auto stream = static_cast<std::uint32_t>(random.between(0, streams - 1));
        pending.push_back({op + random.log_uniform(1, 300), tl.bytes(random.log_uniform(512, largest), stream)});
        for (std::size_t i = 0; i < pending.size();) {
          if (pending[i].due <= op) {
            tl.free(pending[i].id);
            pending[i] = pending.back();
            pending.pop_back();
          } else {
            ++i;
          }
        }
      }
      for (const pending_free& p : pending) tl.free(p.id);
    }
  });
}

// Serving with a KV cache per request and layer that grows the eager way (torch.cat: a new
// tensor `growth` tokens longer, then the old one freed); requests arrive at random with
// log-uniform lengths, and when the caches exceed the budget the oldest request is evicted.
traces::trace generate_kv_cache_eviction(const std::string& name, std::uint64_t seed) {
  return write_workload(name, 1, seed, [&](tensor_timeline& tl, workload_random& random) {
    const std::uint64_t H = 64 * random.log_uniform(4, 128);
    const std::uint64_t layers = random.between(1, 4);
    const std::uint64_t growth = random.log_uniform(4, 128);  // tokens per cache reallocation
    const std::uint64_t token_bytes = 2 * H * bf16;        // keys and values of one token
    const std::uint64_t budget_bytes = random.log_uniform(256 * mib, std::uint64_t{24} << 30);
    tl.tensor(bf16, {vocabulary, H});
    struct request {
      std::uint64_t length, target;
      std::vector<std::uint64_t> caches;
    };
    std::deque<request> running;
    std::uint64_t cache_bytes = 0;
    auto evict_oldest = [&] {
      for (std::uint64_t id : running.front().caches) tl.free(id);
      cache_bytes -= running.front().length * token_bytes * layers;
      running.pop_front();
    };
    const std::uint64_t steps = random.between(3, 6);
    for (std::uint64_t step = 0; step < steps; ++step) {
      const std::uint64_t iterations = random.between(10, 40);
      for (std::uint64_t it = 0; it < iterations; ++it) {
        if (running.empty() || random.chance(15)) {  // a new request: prefill
          request r{random.log_uniform(8, 4096), 0, {}};
          r.target = r.length + random.log_uniform(1, 2048);
          const std::uint64_t scratch = tl.bytes(r.length * H * bf16 * 4);
          for (std::uint64_t l = 0; l < layers; ++l) r.caches.push_back(tl.bytes(r.length * token_bytes));
          tl.free(scratch);
          cache_bytes += r.length * token_bytes * layers;
          running.push_back(std::move(r));
        }
        // Decode: every running request grows by `growth` tokens.
        const std::uint64_t hidden = tl.bytes(running.size() * H * bf16);
        for (request& r : running) {
          for (std::uint64_t& cache : r.caches) {
            const std::uint64_t grown = tl.bytes((r.length + growth) * token_bytes);
            tl.free(cache);
            cache = grown;
          }
          r.length += growth;
          cache_bytes += growth * token_bytes * layers;
        }
        tl.scratch(fp32, {running.size(), vocabulary});
        tl.free(hidden);
        // Finished requests leave; over budget, the oldest is evicted.
        for (std::size_t i = 0; i < running.size();) {
          if (running[i].length >= running[i].target) {
            std::swap(running[i], running.front());
            evict_oldest();
          } else {
            ++i;
          }
        }
        while (cache_bytes > budget_bytes && running.size() > 1) evict_oldest();
      }
    }
  });
}

// Mixture-of-experts layers: tokens routed to E experts with a skewed, per-layer random
// preference, so per-expert buffers range from empty to most of the batch and change
// every step; a training seed keeps expert activations for backward.
traces::trace generate_moe_routing(const std::string& name, std::uint64_t seed) {
  return write_workload(name, 2, seed, [&](tensor_timeline& tl, workload_random& random) {
    const std::uint64_t experts = random.log_uniform(4, 64);
    const std::uint64_t top_k = random.between(1, 2);
    const std::uint64_t H = 64 * random.log_uniform(4, 64);
    const std::uint64_t layers = random.between(1, 8);
    const bool training = random.chance(50);
    for (std::uint64_t l = 0; l < layers; ++l) {
      for (std::uint64_t e = 0; e < experts; ++e) tl.tensor(bf16, {8 * H, H});
    }
    const std::uint64_t steps = random.between(3, 6);
    for (std::uint64_t step = 0; step < steps; ++step) {
      const std::uint64_t tokens = random.log_uniform(128, 32768);
      std::vector<std::uint64_t> saved;
      std::uint64_t x = tl.tensor(bf16, {tokens, H});
      for (std::uint64_t l = 0; l < layers; ++l) {
        const std::uint64_t logits = tl.tensor(fp32, {tokens, experts});
        std::vector<std::uint64_t> weight(experts);
        std::uint64_t total_weight = 0;
        for (std::uint64_t& w : weight) total_weight += (w = random.log_uniform(1, 4096));
        const std::uint64_t dispatched = tl.tensor(bf16, {tokens * top_k, H}, 1);  // all-to-all buffer
        for (std::uint64_t e = 0; e < experts; ++e) {
          const std::uint64_t count = tokens * top_k * weight[e] / total_weight;
          if (count == 0) continue;
          const std::uint64_t in = tl.tensor(bf16, {count, H});
          const std::uint64_t hidden = tl.tensor(bf16, {count, 4 * H});
          tl.scratch(bf16, {count, H});
          if (training) {
            saved.push_back(in);
            saved.push_back(hidden);
          } else {
            tl.free(in);
            tl.free(hidden);
          }
        }
        tl.free(dispatched);
        tl.free(logits);
        const std::uint64_t next = tl.tensor(bf16, {tokens, H});
        if (training) saved.push_back(x);
        else tl.free(x);
        x = next;
      }
      tl.free(x);
      for (std::size_t i = saved.size(); i-- > 0;) {
        if (random.chance(30)) tl.scratch(bf16, {tokens, H});
        tl.free(saved[i]);
      }
    }
  });
}

}  // namespace fragless::bench
