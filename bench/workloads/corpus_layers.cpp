// corpus_layers: see header.
#include "corpus_layers.hpp"

#include "corpus.hpp"

#include <algorithm>

namespace fragless::bench {

std::vector<matrix_shape> layer_matrices(std::uint64_t h) { return {{3 * h, h}, {h, h}, {4 * h, h}, {h, 4 * h}}; }

std::uint64_t capped(std::uint64_t bytes) { return std::clamp<std::uint64_t>(bytes, 1, corpus_max_block_bytes); }

void forward_without_grad(tensor_timeline& tl, std::uint64_t tokens, std::uint64_t h, std::uint64_t layers,
                          forward_layer layer) {
  std::uint64_t x = tl.bytes(capped(tokens * h * bf16));
  for (std::uint64_t l = 0; l < layers; ++l) {
    if (layer == forward_layer::attention_and_mlp) {
      const std::uint64_t qkv = tl.bytes(capped(tokens * 3 * h * bf16));
      const std::uint64_t attended = tl.bytes(capped(tokens * h * bf16));
      tl.free(qkv);
      const std::uint64_t hidden = tl.bytes(capped(tokens * 4 * h * bf16));
      tl.free(attended);
      const std::uint64_t out = tl.bytes(capped(tokens * h * bf16));
      tl.free(hidden);
      tl.free(x);
      x = out;
    } else {
      const std::uint64_t hidden = tl.bytes(capped(tokens * 4 * h * bf16));
      const std::uint64_t out = tl.bytes(capped(tokens * h * bf16));
      tl.free(hidden);
      tl.free(x);
      x = out;
    }
  }
  tl.free(x);
}

}  // namespace fragless::bench
