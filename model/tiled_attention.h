// The fused relative attention's CPU implementation (train.attention:
// tiled): one op for both streams that computes the content term, the band
// of position products the relative shift needs, the segment term, masks,
// scale, softmax (online, tile by tile), counter-based dropout and probs x
// values, with a backward that recomputes each tile, so no [B, H, Lq, K]
// tensor is ever stored. It is also the reference the CUDA kernel's maths is
// tested against on machines without a GPU. The op's contract and its
// dispatch by device are model/attention.h; the CUDA kernel is model/cuda/.
//
// Letters as in model/README.md: B batch, H heads, Lq query rows (L or P),
// K keys, R relative positions (>= K + L), Dh head size.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "model/attention_types.h"

namespace xlnet {

// The argument checks of the fused op (shapes, dtypes, devices), shared by
// the CPU op and the CUDA kernel's entry (model/attention.h); TORCH_CHECK
// failures name the shapes.
void CheckFusedAttentionInputs(const torch::Tensor& qw, const torch::Tensor& qr,
                               const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& k_r,
                               const torch::Tensor& seg,
                               const AttentionBias& bias, int64_t qlen);

// The fused op's CPU implementation on CPU tensors, with
// FusedRelativeAttention's contract (model/attention.h): tiles of queries x
// keys, parallel over (batch, head, query tile) forward and (batch, head)
// backward, dropout from counter_dropout.h.
torch::Tensor TiledRelativeAttention(
    const torch::Tensor& qw, const torch::Tensor& qr, const torch::Tensor& k,
    const torch::Tensor& v, const torch::Tensor& k_r, const torch::Tensor& seg,
    const AttentionBias& bias, int64_t qlen, double scale,
    const AttentionDropout& dropout, const AttentionTiles& tiles = {});

}  // namespace xlnet
