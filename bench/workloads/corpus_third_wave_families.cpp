// corpus_third_wave_families: the third wave of held-out families (Note [Third held-out
// wave]) -- two independent loops sharing one device at their own pace (a trainer fed by a
// data pipeline on the device), training interrupted by evaluation and checkpoints, and
// speculative decoding on a continuously batched server. Shapes are drawn per seed and per
// step.
// Invariant: whatever is live at the end of the trace is state the family keeps on purpose
// (weights, optimizer state, the server's caches of requests still running).
#include "corpus.hpp"
#include "corpus_layers.hpp"
#include "tensor_timeline.hpp"

#include <algorithm>
#include <deque>
#include <tuple>
#include <vector>

namespace fragless::bench {

// Note [Third held-out wave]
// Written after the placement policy of this release and its eight changes, and added to
// the corpus as they are, like the two waves before them (Note [Held-out families], Note
// [Second held-out wave]): their first replay's figures are reported as measured (README,
// "The third held-out wave"). They model what none of the other fourteen families
// does. Two loops of different periods whose allocations interleave by time, so
// the program as a whole never repeats with a short period, though each loop does. Rare
// phases inside a loop: an evaluation every few steps at another batch size, and
// checkpoints that copy every weight once. And a server whose caches are rebuilt whenever
// its batch changes, with a draft model's many small steps between the target model's
// large ones.

namespace {

// The four matrices of a transformer layer of width h, in elements.
std::vector<std::uint64_t> layer_weight_elements(std::uint64_t h) {
  std::vector<std::uint64_t> elements;
  for (const matrix_shape& shape : layer_matrices(h)) elements.push_back(shape.elements());
  return elements;
}

// One program's operations, recorded before the programs are interleaved: an allocation
// names a slot, a free the slot it frees; `time` places it among the other program's.
struct recorded_op {
  std::uint64_t time;
  std::uint32_t program;
  std::uint64_t sequence;
  bool allocation;
  std::uint64_t size_bytes;
  std::size_t slot;
};

class program_recorder {
public:
  program_recorder(std::uint32_t program, std::vector<recorded_op>& ops, std::size_t& slots)
      : program_(program), ops_(ops), slots_(slots) {}
  // The next operations are spread evenly over [begin, end).
  void span(std::uint64_t begin, std::uint64_t end, std::size_t expected_ops) {
    begin_ = begin;
    step_ = std::max<std::uint64_t>(1, (end - begin) / std::max<std::size_t>(1, expected_ops));
    made_ = 0;
  }
  std::size_t bytes(std::uint64_t size_bytes) {
    const std::size_t slot = slots_++;
    ops_.push_back({now(), program_, ops_.size(), true, capped(size_bytes), slot});
    return slot;
  }
  void free(std::size_t slot) { ops_.push_back({now(), program_, ops_.size(), false, 0, slot}); }
  // A free at a time of the other program's (its consumer's), never before this program's
  // latest operation.
  void free_at(std::size_t slot, std::uint64_t time) {
    ops_.push_back({std::max(time, last_ + 1), program_, ops_.size(), false, 0, slot});
  }

private:
  // Times only grow within a program, so its operations keep their order when interleaved.
  std::uint64_t now() {
    last_ = std::max(last_ + 1, begin_ + step_ * made_++);
    return last_;
  }
  std::uint32_t program_;
  std::vector<recorded_op>& ops_;
  std::size_t& slots_;
  std::uint64_t begin_ = 0, step_ = 1, made_ = 0, last_ = 0;
};

}  // namespace

// A trainer fed by a data pipeline on the device (DALI-style decoding, or a second thread's
// preprocessing on its own stream): the pipeline decodes each image of a batch into a
// buffer of its own drawn resolution, crops and resizes it to the model's input, and
// stacks the batch, up to `depth` batches ahead of the trainer, which frees a batch when
// its step is done. The trainer's steps repeat exactly; the pipeline's batches vary image
// by image; the two run at their own drawn paces and their allocations interleave by time.
traces::trace generate_two_loops(const std::string& name, std::uint64_t seed) {
  return write_workload(name, 2, seed, [&](tensor_timeline& tl, workload_random& random) {
    const std::uint64_t images = random.between(4, 64);
    const std::uint64_t side = 32 * random.between(2, 12);  // the model's input resolution
    const std::uint64_t patch = side % 3 == 0 ? 12 : 16;
    const std::uint64_t tokens = images * std::max<std::uint64_t>(1, (side / patch) * (side / patch));
    const std::uint64_t h = 64 * random.log_uniform(4, 32);
    const std::uint64_t layers = random.between(2, 16);
    const std::uint64_t depth = random.between(1, 4);
    const std::uint64_t steps = random.between(4, 10);
    const std::uint64_t trainer_duration = random.log_uniform(1000, 100000);
    const std::uint64_t pipeline_duration = trainer_duration * random.between(30, 300) / 100;
    std::vector<std::uint64_t> weights;
    weights.push_back(tl.bytes(3 * patch * patch * h * bf16));
    for (std::uint64_t l = 0; l < layers; ++l)
      for (std::uint64_t elements : layer_weight_elements(h)) weights.push_back(tl.bytes(elements * bf16));

    std::vector<recorded_op> ops;
    std::size_t slots = 0;
    program_recorder trainer(0, ops, slots), pipeline(1, ops, slots);
    std::vector<std::uint64_t> pipeline_end(steps), trainer_start(steps), trainer_end(steps);
    std::vector<std::size_t> batch_slot(steps);
    std::vector<std::size_t> adam_state;
    for (std::uint64_t j = 0; j < steps; ++j) {
      // The pipeline: batch j starts once batch j-1 is done and the trainer has taken batch
      // j - depth (its queue holds `depth` batches).
      std::uint64_t start = j == 0 ? 0 : pipeline_end[j - 1];
      if (j >= depth) start = std::max(start, trainer_start[j - depth]);
      pipeline_end[j] = start + pipeline_duration;
      pipeline.span(start, pipeline_end[j], 8 * images + 1);
      std::vector<std::size_t> resized;
      for (std::uint64_t i = 0; i < images; ++i) {
        const std::uint64_t height = random.log_uniform(64, 2048), width = random.log_uniform(64, 2048);
        const std::size_t encoded = pipeline.bytes(random.log_uniform(16 * kib, 8 * mib));
        const std::size_t decoded = pipeline.bytes(height * width * 3);
        pipeline.free(encoded);
        const std::uint64_t crop = random.between(50, 100);
        const std::size_t cropped = pipeline.bytes(height * crop / 100 * width * crop / 100 * 3);
        pipeline.free(decoded);
        resized.push_back(pipeline.bytes(3 * side * side * fp32));
        pipeline.free(cropped);
      }
      batch_slot[j] = pipeline.bytes(images * 3 * side * side * fp32);
      for (std::size_t slot : resized) pipeline.free(slot);
      // The trainer: step j starts once step j-1 is done and batch j is ready.
      trainer_start[j] = std::max(j == 0 ? 0 : trainer_end[j - 1], pipeline_end[j]);
      trainer_end[j] = trainer_start[j] + trainer_duration;
      trainer.span(trainer_start[j], trainer_end[j], 10 * layers + 6 + 4 * weights.size());
      std::vector<std::size_t> saved;
      std::size_t x = trainer.bytes(tokens * h * bf16);  // the patch embedding
      for (std::uint64_t l = 0; l < layers; ++l) {
        saved.push_back(x);
        saved.push_back(trainer.bytes(tokens * 4 * h * bf16));
        x = trainer.bytes(tokens * h * bf16);
      }
      trainer.free(trainer.bytes(images * 1000 * fp32));  // the head's logits
      std::size_t grad = trainer.bytes(tokens * h * bf16);
      trainer.free(x);
      std::vector<std::pair<std::size_t, std::uint64_t>> gradients;  // (slot, elements)
      for (std::size_t i = saved.size(); i-- > 0;) {
        if (i % 2 == 0)
          for (std::uint64_t elements : layer_weight_elements(h))
            gradients.emplace_back(trainer.bytes(elements * bf16), elements);
        const std::size_t next = trainer.bytes(tokens * h * bf16);
        trainer.free(grad);
        grad = next;
        trainer.free(saved[i]);
      }
      trainer.free(grad);
      // The update: Adam's two moments (fp32) made at the first, a foreach temporary each.
      const bool first_update = adam_state.empty();
      for (const auto& [slot, elements] : gradients) {
        if (first_update) {
          adam_state.push_back(trainer.bytes(elements * fp32));
          adam_state.push_back(trainer.bytes(elements * fp32));
        }
        trainer.free(trainer.bytes(elements * fp32));
        trainer.free(slot);
      }
      pipeline.free_at(batch_slot[j], trainer_end[j]);
    }
    // Interleave by time; at equal times the trainer first, each program in its own order.
    std::sort(ops.begin(), ops.end(), [](const recorded_op& a, const recorded_op& b) {
      return std::tie(a.time, a.program, a.sequence) < std::tie(b.time, b.program, b.sequence);
    });
    std::vector<std::uint64_t> ids(slots, 0);
    for (const recorded_op& op : ops) {
      if (op.allocation)
        ids[op.slot] = tl.bytes(op.size_bytes, op.program);
      else
        tl.free(ids[op.slot]);
    }
  });
}

// Training interrupted by its own bookkeeping: micro-batches accumulated into gradients kept
// across them; every few steps an evaluation over a few batches at a larger batch size
// (no autograd: activations freed as they go, logits over the vocabulary, predictions
// gathered with torch.cat into one growing tensor); every few steps, and at the end, a
// checkpoint that copies each weight, and on some seeds the optimizer state, into an fp32
// tensor of its own -- one at a time, or all of them before any is written out.
traces::trace generate_train_eval_checkpoint(const std::string& name, std::uint64_t seed) {
  return write_workload(name, 1, seed, [&](tensor_timeline& tl, workload_random& random) {
    const std::uint64_t h = 64 * random.log_uniform(4, 64);
    const std::uint64_t layers = random.between(2, 24);
    const std::uint64_t tokens = random.log_uniform(256, 16384);
    const std::uint64_t micro_batches = random.between(1, 4);
    const std::uint64_t eval_every = random.between(2, 5), eval_batches = random.between(1, 4);
    const std::uint64_t eval_tokens = tokens * random.between(2, 8);
    const std::uint64_t checkpoint_every = random.between(3, 8);
    const bool checkpoint_all_at_once = random.chance(40), checkpoint_optimizer = random.chance(50);
    const std::uint64_t steps = random.between(6, 16);
    std::vector<std::uint64_t> weight_elements = {vocabulary * h};
    for (std::uint64_t l = 0; l < layers; ++l)
      for (std::uint64_t elements : layer_weight_elements(h)) weight_elements.push_back(elements);
    for (std::uint64_t elements : weight_elements) tl.bytes(elements * bf16);
    std::vector<std::uint64_t> adam_state;
    auto checkpoint = [&] {
      std::vector<std::uint64_t> staged;
      auto stage = [&](std::uint64_t bytes) {
        staged.push_back(tl.bytes(capped(bytes)));
        if (!checkpoint_all_at_once) {
          tl.free(staged.back());
          staged.pop_back();
        }
      };
      for (std::uint64_t elements : weight_elements) stage(elements * fp32);
      if (checkpoint_optimizer)
        for (std::size_t i = 0; i < adam_state.size(); ++i) stage(weight_elements[i / 2] * fp32);
      for (std::uint64_t id : staged) tl.free(id);
    };
    for (std::uint64_t step = 0; step < steps; ++step) {
      std::vector<std::uint64_t> gradients;
      for (std::uint64_t micro = 0; micro < micro_batches; ++micro) {
        std::vector<std::uint64_t> saved;
        std::uint64_t x = tl.bytes(capped(tokens * h * bf16));
        for (std::uint64_t l = 0; l < layers; ++l) {
          saved.push_back(x);
          saved.push_back(tl.bytes(capped(tokens * 4 * h * bf16)));
          x = tl.bytes(capped(tokens * h * bf16));
        }
        const std::uint64_t logits = tl.bytes(capped(tokens * vocabulary * fp32));
        tl.free(x);
        std::uint64_t grad = tl.bytes(capped(tokens * h * bf16));
        tl.free(logits);
        for (std::size_t i = saved.size(); i-- > 0;) {
          if (micro == 0 && i % 2 == 0)
            for (std::uint64_t elements : layer_weight_elements(h)) gradients.push_back(tl.bytes(elements * bf16));
          const std::uint64_t next = tl.bytes(capped(tokens * h * bf16));
          tl.free(grad);
          grad = next;
          tl.free(saved[i]);
        }
        if (micro == 0) gradients.push_back(tl.bytes(weight_elements[0] * bf16));  // the embedding's
        tl.free(grad);
      }
      const bool first_update = adam_state.empty();
      for (std::size_t i = 0; i < weight_elements.size(); ++i) {
        if (first_update) {
          adam_state.push_back(tl.bytes(weight_elements[i] * fp32));
          adam_state.push_back(tl.bytes(weight_elements[i] * fp32));
        }
        tl.free(tl.bytes(weight_elements[i] * fp32));
      }
      for (std::uint64_t g : gradients) tl.free(g);
      if ((step + 1) % eval_every == 0) {
        std::uint64_t predictions = 0, gathered = 0;
        for (std::uint64_t batch = 0; batch < eval_batches; ++batch) {
          forward_without_grad(tl, eval_tokens, h, layers, forward_layer::mlp_only);
          const std::uint64_t logits = tl.bytes(capped(eval_tokens * vocabulary * fp32));
          tl.scratch(fp32, {eval_tokens});  // the loss
          gathered += eval_tokens;
          const std::uint64_t grown = tl.bytes(capped(gathered * int64_bytes));
          tl.free(logits);
          if (predictions != 0) tl.free(predictions);
          predictions = grown;
        }
        tl.scratch(fp32, {gathered});  // the metrics
        tl.free(predictions);
      }
      if ((step + 1) % checkpoint_every == 0 || step + 1 == steps) checkpoint();
    }
  });
}

// Speculative decoding on a continuously batched server: a draft model proposes `lookahead`
// tokens one at a time, the target model checks them in one pass, and each request keeps a
// drawn number of them. Both models keep a key and a value cache per layer for the whole
// batch, padded to the longest request and grown a block of tokens at a time; when a
// request joins (after its prefill) or leaves, every cache is rebuilt at the new batch
// size -- made anew, copied, the old one freed.
traces::trace generate_speculative_decoding(const std::string& name, std::uint64_t seed) {
  return write_workload(name, 1, seed, [&](tensor_timeline& tl, workload_random& random) {
    const std::uint64_t h = 64 * random.log_uniform(8, 64);
    const std::uint64_t draft_h = std::max<std::uint64_t>(64, h / random.between(2, 8));
    const std::uint64_t layers = random.between(2, 24), draft_layers = random.between(1, 4);
    const std::uint64_t lookahead = random.between(2, 6);
    const std::uint64_t block_tokens = 16 * random.log_uniform(1, 32);
    const std::uint64_t max_batch = random.between(1, 32);
    const std::uint64_t rounds = random.between(20, 80);
    for (std::uint64_t elements : {vocabulary * h, vocabulary * draft_h}) tl.bytes(elements * bf16);
    for (std::uint64_t l = 0; l < layers; ++l)
      for (std::uint64_t elements : layer_weight_elements(h)) tl.bytes(elements * bf16);
    for (std::uint64_t l = 0; l < draft_layers; ++l)
      for (std::uint64_t elements : layer_weight_elements(draft_h)) tl.bytes(elements * bf16);
    struct request {
      std::uint64_t length, target;
    };
    std::deque<request> batch;
    std::vector<std::uint64_t> caches, draft_caches;  // keys and values, per layer
    std::uint64_t capacity = 0;                        // tokens the caches hold per request
    auto rebuild = [&](std::uint64_t needed) {
      capacity = (needed + block_tokens - 1) / block_tokens * block_tokens;
      const std::uint64_t requests = std::max<std::size_t>(1, batch.size());
      const auto models = {std::tuple{&caches, h, layers}, std::tuple{&draft_caches, draft_h, draft_layers}};
      for (auto [list, width, count] : models) {
        std::vector<std::uint64_t> made;
        for (std::uint64_t i = 0; i < 2 * count; ++i) {
          made.push_back(tl.bytes(capped(requests * capacity * width * bf16)));
          if (i < list->size()) tl.free((*list)[i]);
        }
        *list = std::move(made);
      }
    };
    auto longest = [&] {
      std::uint64_t most = 0;
      for (const request& r : batch) most = std::max(most, r.length);
      return most;
    };
    for (std::uint64_t round = 0; round < rounds; ++round) {
      bool changed = false;
      if (batch.size() < max_batch && (batch.empty() || random.chance(25))) {
        const request joining{random.log_uniform(16, 2048), 0};
        forward_without_grad(tl, joining.length, h, layers, forward_layer::mlp_only);  // prefill, both models
        forward_without_grad(tl, joining.length, draft_h, draft_layers, forward_layer::mlp_only);
        batch.push_back({joining.length, joining.length + random.log_uniform(16, 1024)});
        changed = true;
      }
      const std::uint64_t needed = longest() + lookahead + 1;
      if (changed || needed > capacity) rebuild(std::max(needed, capacity));
      const std::uint64_t n = batch.size();
      for (std::uint64_t t = 0; t < lookahead; ++t) {  // the draft, a token at a time
        forward_without_grad(tl, n, draft_h, draft_layers, forward_layer::mlp_only);
        tl.scratch(fp32, {n, vocabulary});
      }
      forward_without_grad(tl, n * (lookahead + 1), h, layers, forward_layer::mlp_only);  // the target checks them all
      const std::uint64_t logits = tl.tensor(fp32, {n, lookahead + 1, vocabulary});
      tl.scratch(int64_bytes, {n, lookahead + 1});  // the accepted tokens
      tl.free(logits);
      for (request& r : batch) r.length += random.between(1, lookahead + 1);
      const std::size_t before = batch.size();
      batch.erase(std::remove_if(batch.begin(), batch.end(), [](const request& r) { return r.length >= r.target; }),
                  batch.end());
      if (batch.size() != before && !batch.empty()) rebuild(capacity);
    }
  });
}

}  // namespace fragless::bench
