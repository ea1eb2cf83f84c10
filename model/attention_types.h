// The plain types every attention core shares: what a query may attend to
// (AttentionBias), the core's choice and tiling (AttentionOptions) and the
// counter-based dropout of the probabilities (AttentionDropout). Kept apart
// from the cores so that the unfused core (relative_attention.h), the fused
// op (tiled_attention.h), LibTorch's SDPA (sdpa_attention.h), the CUDA
// kernels and the dispatch over them (attention.h) include these without
// including each other.
//
// Letters as in model/README.md: B batch, Lq query rows (L or P), K keys.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "config/settings.h"

namespace xlnet {

// Everything the attention core needs besides the projected heads, for Lq
// queries (Lq = L for the content stream, P or L for the query stream).
struct AttentionBias {
  // [B, 1, Lq, K] bool, true = may NOT attend; undefined = no masking.
  torch::Tensor mask;
  // [B, 1, Lq, K] bool, true = different segment; undefined = no ef term.
  torch::Tensor seg_diff;
  // [B, Lq] int64 query positions for RelShiftAt; undefined = RelShift
  // (queries are positions 0..L-1 in order).
  torch::Tensor query_pos;
  // mask and seg_diff as the tensor-core kernels read them (int32 bit
  // words, model/cuda/tc_attention_kernels.h): packed once per forward by
  // PackAttentionBias (attention.h) for every layer and both directions,
  // or undefined (each call packs its own). Whoever changes mask or
  // seg_diff of a copy clears them.
  torch::Tensor blocked_bits, other_bits;
};

// Tile sizes of the fused op's CPU implementation (the CUDA kernel has its
// own).
struct AttentionTiles {
  // Query rows per tile.
  int64_t query = 64;
  // Keys per tile; 0 = all K keys in one tile.
  int64_t key = 0;
};

// Which attention core the model runs, and how.
struct AttentionOptions {
  // train.attention (config/settings.h).
  AttentionImpl impl = AttentionImpl::kUnfused;
  // Tiling of the 'tiled' core.
  AttentionTiles tiles;
  // The fused cores ('tiled', 'cuda') add the queries' two head biases
  // (q + r_w_bias, q + r_r_bias) with AddBiasPair (model/fused_elementwise.h)
  // where it runs on q's device; set from train.fused_elementwise.
  bool fused_query_biases = false;
};

// Dropout of the attention probabilities from the counter-based generator in
// model/philox.h: element (b, h, i, j) is kept iff its draw from (seed,
// offset) falls below (1 - p); kept values are scaled by 1 / (1 - p).
struct AttentionDropout {
  double p = 0;  // drop probability in [0, 1); 0 = no dropout
  uint64_t seed = 0;
  uint64_t offset = 0;
};

}  // namespace xlnet
