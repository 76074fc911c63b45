// corpus_layers: the transformer pieces several corpus generators share -- a layer's four
// weight matrices, a block size capped at the corpus's largest block, and a forward pass
// without autograd.
// Invariant: each writes the same events, in the same order, as the generators that share
// it wrote before it was shared (a corpus seed's trace is fixed by its name, Note [Corpus
// peak cap] in corpus.hpp).
#pragma once

#include "tensor_timeline.hpp"

#include <cstdint>
#include <vector>

namespace fragless::bench {

// A weight matrix, as (rows, columns).
struct matrix_shape {
  std::uint64_t rows, columns;
  std::uint64_t elements() const { return rows * columns; }
};

// The four matrices of a transformer layer of width h: QKV, output, up, down projections.
std::vector<matrix_shape> layer_matrices(std::uint64_t h);

// `bytes` within [1, corpus_max_block_bytes].
std::uint64_t capped(std::uint64_t bytes);

// What a layer of forward_without_grad makes: attention then the MLP, or the MLP alone.
enum class forward_layer { attention_and_mlp, mlp_only };

// A forward over `tokens` tokens of width h through `layers` layers without autograd:
// each layer's activations are freed as soon as the next one is made.
void forward_without_grad(tensor_timeline& tl, std::uint64_t tokens, std::uint64_t h, std::uint64_t layers,
                          forward_layer layer);

}  // namespace fragless::bench
