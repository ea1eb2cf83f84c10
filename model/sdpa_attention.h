// XLNet's relative attention through LibTorch's fused
// scaled_dot_product_attention (train.attention: sdpa).
//
// SDPA computes softmax(q k^T * scale + bias) v with dropout, tile by tile
// (on CUDA its memory-efficient kernel, tensor cores, no [B, H, Lq, K]
// probabilities stored). XLNet's score has two more terms than q.k: the
// relative position term (a shifted band of (q + r_r) k_r^T products) and
// the segment term. Both, with the masks, become SDPA's additive bias, whose
// gradient SDPA returns. So only one [B, H, Lq, K] tensor (the bias) is
// written forward and one (its gradient) backward; the content term,
// softmax, dropout and probs x values never leave the kernel.
//
// Needs LibTorch >= 2.1 (SDPA with `scale`); SdpaAvailable() says whether
// this build has it. On CUDA, in builds with -DXLNET_CUDA_ATTENTION=ON, the
// bias is built by one kernel (model/cuda/position_bias.h) instead of five
// LibTorch ops. Dropout masks come from LibTorch's CUDA generator (as the
// unfused path's), not from the counter-based stream of 'tiled'/'cuda'.
#pragma once

#include <torch/torch.h>

#include "model/relative_attention.h"

namespace xlnet {

// Whether this LibTorch has scaled_dot_product_attention with a scale
// argument (>= 2.1).
bool SdpaAvailable();

// The additive bias of one attention call, [B, H, Lq, K] in bd's dtype:
//   scale * (shift(bd)[i, j] + seg[i, seg_diff[i, j]]), or
//   MaskedScoreValue(dtype) where bias.mask is true,
// with bd = (q + r_r_bias) k_r^T [B, H, Lq, R], shift = RelShift (queries
// 0..Lq-1) or RelShiftAt (bias.query_pos, queries of a qlen-long sequence),
// seg = (q + r_s_bias) seg_embed^T [B, H, Lq, 2] (undefined iff
// bias.seg_diff is). Differentiable in bd and seg. LibTorch ops, or the
// CUDA kernel for CUDA tensors where compiled.
torch::Tensor RelativePositionBias(const torch::Tensor& bd,
                                   const torch::Tensor& seg,
                                   const AttentionBias& bias, int64_t qlen,
                                   int64_t klen, double scale);

// RelativeAttentionCore's contract (relative_attention.h; same result up to
// rounding with dropout 0) through scaled_dot_product_attention. Computes
// in k's dtype (bf16/fp16 under autocast). An error in builds whose
// LibTorch has no SDPA.
torch::Tensor SdpaRelativeAttentionCore(
    const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
    const torch::Tensor& k_r, const torch::Tensor& r_w_bias,
    const torch::Tensor& r_r_bias, const torch::Tensor& r_s_bias,
    const torch::Tensor& seg_embed, const AttentionBias& bias, int64_t qlen,
    double dropout, bool training);

}  // namespace xlnet
