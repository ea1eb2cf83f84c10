// The fused relative attention (issue #11): one op for both streams that
// computes the content term, the band of position products the relative
// shift needs, the segment term, masks, scale, softmax (online, tile by
// tile), counter-based dropout and probs x values, with a backward that
// recomputes each tile, so no [B, H, Lq, K] tensor is ever stored.
//
//   * CPU ("tiled"): this file's implementation, tiles of queries x keys,
//     parallel over (batch, head, query tile) forward and (batch, head)
//     backward. It is also the reference the CUDA kernel's maths is tested
//     against on machines without a GPU.
//   * CUDA ("cuda"): model/cuda/, built only with XLNET_WITH_CUDA=ON.
//
// Letters as in model/README.md: B batch, H heads, Lq query rows (L or P),
// K keys, R relative positions (>= K + L), Dh head size.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <string>

#include "config/settings.h"
#include "model/attention_types.h"

namespace xlnet {

// Whether this build contains the CUDA kernel (XLNET_WITH_CUDA=ON).
bool CudaAttentionCompiled();

// The fused op on projected inputs, all of one floating dtype:
//   qw = q + r_w_bias, qr = q + r_r_bias  [B, H, Lq, Dh]
//   k, v                                  [B, H, K, Dh]
//   k_r                                   [B or 1, H, R, Dh], R >= K + qlen
//   seg = (q + r_s_bias) seg_embed^T      [B, H, Lq, 2] (same, different
//         segment); required iff bias.seg_diff is defined
//   score[i, j] = scale * (qw_i.k_j + qr_i.k_r[j + qlen - pos_i]
//                          + seg[i, seg_diff[i, j]])
// with pos_i = bias.query_pos[b, i] (or i when undefined), masked by
// bias.mask, softmax over j, dropout, times v. Rows with every key masked
// give zeros. Returns [B, H, Lq, Dh] in the inputs' dtype; differentiable in
// qw, qr, k, v, k_r and seg. Accumulates in fp32 (fp64 for fp64 inputs).
// CPU tensors run the tiled implementation; CUDA tensors the kernel (only
// in XLNET_WITH_CUDA builds; otherwise an error).
torch::Tensor FusedRelativeAttention(
    const torch::Tensor& qw, const torch::Tensor& qr, const torch::Tensor& k,
    const torch::Tensor& v, const torch::Tensor& k_r, const torch::Tensor& seg,
    const AttentionBias& bias, int64_t qlen, double scale,
    const AttentionDropout& dropout, const AttentionTiles& tiles = {});

// The argument checks of FusedRelativeAttention (shapes, dtypes, devices);
// TORCH_CHECK failures name the shapes.
void CheckFusedAttentionInputs(const torch::Tensor& qw, const torch::Tensor& qr,
                               const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& k_r,
                               const torch::Tensor& seg,
                               const AttentionBias& bias, int64_t qlen);

// RelativeAttentionCore's contract (same arguments, same result up to
// rounding with dropout 0) through FusedRelativeAttention. `impl` must be
// kTiled (CPU tensors) or kCuda (CUDA tensors). In training with dropout > 0
// the seed is one draw from the default CPU generator, so activation
// checkpointing's replay and a resumed run draw the same masks; the masks
// are not those torch::dropout would draw for the unfused path.
torch::Tensor FusedRelativeAttentionCore(
    const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
    const torch::Tensor& k_r, const torch::Tensor& r_w_bias,
    const torch::Tensor& r_r_bias, const torch::Tensor& r_s_bias,
    const torch::Tensor& seg_embed, const AttentionBias& bias, int64_t qlen,
    double dropout, bool training, const AttentionOptions& options);

// One draw from the default CPU generator: the seed of a counter-based
// dropout (this op's, CounterDropout's, the fused element-wise ops').
// Activation checkpointing replays it (it restores the generator) and the
// trainer saves the generator with every checkpoint.
uint64_t DrawCpuSeed();

// Dropout of any tensor from the same counter-based generator: x * keep /
// (1 - p), keep drawn for x's flat index from one seed per call (a draw from
// the default CPU generator, like the fused op's), the mask built in
// parallel. With attention 'tiled' every dropout of the backbone uses it:
// LibTorch's CPU dropout draws its Bernoulli mask serially from a mutexed
// generator, which on a few cores costs about as much as a matmul of the
// layer. Identity when !training or p == 0.
torch::Tensor CounterDropout(const torch::Tensor& x, double p, bool training);

// torch::dropout, or CounterDropout when `counter`.
torch::Tensor BackboneDropout(const torch::Tensor& x, double p, bool training,
                              bool counter);

// The keep decisions of AttentionDropout as a [B, H, Lq, K] bool tensor
// (true = kept): the reference for tests; the op never materialises it.
torch::Tensor AttentionDropoutKeepMask(int64_t b, int64_t h, int64_t lq,
                                       int64_t k, const AttentionDropout& d);

}  // namespace xlnet
