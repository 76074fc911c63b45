// cnn_training: ResNet-style training steps in fp32: four stages of basic blocks, channels
// doubling and resolution halving per stage. Forward saves each convolution's input,
// batch-norm statistics and ReLU output; convolutions take seeded cuDNN-like workspaces of
// varying size; backward frees saved tensors stage by stage; SGD with momentum keeps one
// buffer per weight from the first step.
// Invariant: each step frees everything it allocated except weights and momentum.
#include "tensor_timeline.hpp"
#include "workload.hpp"

#include <vector>

namespace fragless::bench {

namespace {
constexpr std::uint64_t stages = 4;
}  // namespace

traces::trace generate_cnn_training(const workload_spec& spec) {
  return write_workload(format_workload_spec(spec), 2, spec.seed, [&](tensor_timeline& tl, workload_random& random) {
    const std::uint64_t C0 = spec.model, B = spec.batch, side0 = spec.sequence;
    const std::uint64_t blocks_per_stage = spec.layers / stages == 0 ? 1 : spec.layers / stages;

    struct conv {
      std::uint64_t in_channels, out_channels, side;
    };
    std::vector<conv> convs;
    convs.push_back(conv{3, C0, side0 / 2});
    for (std::uint64_t stage = 0; stage < stages; ++stage) {
      const std::uint64_t channels = C0 << stage;
      const std::uint64_t side = side0 / (4u << stage) == 0 ? 1 : side0 / (4u << stage);
      for (std::uint64_t block = 0; block < blocks_per_stage; ++block) {
        const std::uint64_t in = block == 0 && stage > 0 ? channels / 2 : channels;
        convs.push_back(conv{in, channels, side});
        convs.push_back(conv{channels, channels, side});
      }
    }
    std::vector<std::uint64_t> weight_sizes;
    for (const conv& c : convs) {
      weight_sizes.push_back(c.in_channels * c.out_channels * 9 * fp32);
      weight_sizes.push_back(c.out_channels * fp32);  // bn weight
      weight_sizes.push_back(c.out_channels * fp32);  // bn bias
    }
    const std::uint64_t classes = 1000, features = C0 << (stages - 1);
    weight_sizes.push_back(features * classes * fp32);
    weight_sizes.push_back(classes * fp32);
    for (std::uint64_t size : weight_sizes) tl.bytes(size);
    for (const conv& c : convs) {  // bn running statistics
      tl.tensor(fp32, {c.out_channels});
      tl.tensor(fp32, {c.out_channels});
    }
    std::vector<std::uint64_t> momentum;

    for (std::uint64_t step = 0; step < spec.steps; ++step) {
      const std::uint64_t images = tl.tensor(fp32, {B, 3, side0, side0}, 1);
      const std::uint64_t targets = tl.tensor(8, {B}, 1);
      std::vector<std::vector<std::uint64_t>> saved(convs.size());
      for (std::size_t i = 0; i < convs.size(); ++i) {
        const conv& c = convs[i];
        const std::uint64_t workspace = tl.bytes(random.between(1, 64) << 20);
        saved[i].push_back(tl.tensor(fp32, {B, c.out_channels, c.side, c.side}));  // conv out
        tl.free(workspace);
        saved[i].push_back(tl.tensor(fp32, {c.out_channels}));  // bn mean
        saved[i].push_back(tl.tensor(fp32, {c.out_channels}));  // bn invstd
        saved[i].push_back(tl.tensor(fp32, {B, c.out_channels, c.side, c.side}));  // bn/relu out
        if (i % 2 == 0 && i > 0) tl.scratch(fp32, {B, c.out_channels, c.side, c.side});  // residual add
      }
      const std::uint64_t pooled = tl.tensor(fp32, {B, features});
      const std::uint64_t logits = tl.tensor(fp32, {B, classes});
      const std::uint64_t loss = tl.tensor(fp32, {1});
      std::vector<std::uint64_t> grads;
      const std::uint64_t grad_logits = tl.tensor(fp32, {B, classes});
      grads.push_back(tl.bytes(weight_sizes[weight_sizes.size() - 2]));
      grads.push_back(tl.bytes(weight_sizes.back()));
      tl.free(logits);
      tl.free(grad_logits);
      tl.free(pooled);
      std::uint64_t grad = tl.tensor(fp32, {B, convs.back().out_channels, convs.back().side, convs.back().side});
      for (std::size_t i = convs.size(); i-- > 0;) {
        const conv& c = convs[i];
        const std::uint64_t grad_bn = tl.tensor(fp32, {B, c.out_channels, c.side, c.side});
        grads.push_back(tl.bytes(weight_sizes[3 * i + 1]));
        grads.push_back(tl.bytes(weight_sizes[3 * i + 2]));
        const std::uint64_t workspace = tl.bytes(random.between(1, 128) << 20);
        grads.push_back(tl.bytes(weight_sizes[3 * i]));
        const std::uint64_t grad_in = tl.tensor(fp32, {B, c.in_channels, i == 0 ? side0 : c.side, i == 0 ? side0 : c.side});
        tl.free(workspace);
        tl.free(grad_bn);
        tl.free(grad);
        grad = grad_in;
        for (std::uint64_t id : saved[i]) tl.free(id);
      }
      tl.free(grad);
      tl.free(loss);
      tl.free(images);
      tl.free(targets);
      if (momentum.empty()) {
        for (std::uint64_t size : weight_sizes) momentum.push_back(tl.bytes(size));
      }
      for (std::uint64_t id : grads) tl.free(id);
    }
  });
}

}  // namespace fragless::bench
