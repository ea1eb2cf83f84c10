// The one home of the attention cores' choice (train.attention): what each
// needs (CheckAttentionAvailable) and the one dispatch (AttentionCore).
// The cores themselves live below this file and never include it:
//   unfused  relative_attention.h   LibTorch ops, the reference
//   tiled    tiled_attention.h      the fused op on the CPU
//   cuda     cuda/cuda_attention.h  the fused op's CUDA kernel (built with
//                                   -DXLNET_CUDA_ATTENTION=ON)
//   sdpa     sdpa_attention.h       LibTorch's SDPA with our bias
// The enum and its names are config/settings.h's (AttentionImpl), as for
// every enumerated setting.
//
// Letters as in model/README.md: B batch, H heads, Lq query rows (L or P),
// K keys, R relative positions (>= K + L), Dh head size.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "absl/status/status.h"
#include "model/attention_types.h"

namespace xlnet {

// Whether this build contains the fused op's CUDA kernel
// (-DXLNET_WITH_CUDA=ON -DXLNET_CUDA_ATTENTION=ON).
bool CudaAttentionCompiled();

// Whether attention 'cuda' runs fp16/bf16 inputs with head size 64 on the
// tensor-core kernels, forward and backward (-DXLNET_CUDA_TC_ATTENTION=ON,
// the default of builds with our CUDA kernels;
// model/cuda/tc_attention_kernels.h).
bool CudaTensorCoreAttentionCompiled();

// The core train.attention: auto runs: 'cuda' where the tensor-core
// kernels take the model (a CUDA device, compute dtype bf16 or fp16, head
// size 64, a build with them; the fastest deterministic core there),
// 'unfused' everywhere else. Any other setting is returned as it is.
AttentionImpl ResolveAttention(AttentionImpl setting,
                               const torch::Device& device,
                               torch::ScalarType compute_dtype, int64_t d_head);

// k_r [G, H, R, Dh] (G groups of consecutive samples, PositionsPerSample)
// as the core `impl` runs best on it for a batch of b in `dtype`: the
// tensor-core kernels take the groups as they are (one position product a
// group); the other cores get one row a sample, made here once for both
// streams of a layer rather than by each core call.
torch::Tensor PositionsForCore(AttentionImpl impl, const torch::Tensor& k_r,
                               torch::ScalarType dtype, int64_t b);

// Packs bias->mask and seg_diff once for all layers when `impl` runs them
// through the tensor-core kernels (cuda, CUDA masks, a build with the
// kernels): bias->blocked_bits and other_bits. Otherwise nothing.
void PackAttentionBias(AttentionImpl impl, AttentionBias* bias);

// Whether `impl` can run on `device` in this build: 'tiled' on the CPU
// only, 'cuda' on CUDA devices in builds with the kernel, 'sdpa' with
// LibTorch >= 2.1, 'unfused' always; 'auto' must be resolved first. The
// error names train.attention and what to choose instead.
absl::Status CheckAttentionAvailable(AttentionImpl impl,
                                     const torch::Device& device);

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
// CPU tensors run TiledRelativeAttention (tiled_attention.h); CUDA tensors
// the kernel (only in builds with it; otherwise an error).
torch::Tensor FusedRelativeAttention(
    const torch::Tensor& qw, const torch::Tensor& qr, const torch::Tensor& k,
    const torch::Tensor& v, const torch::Tensor& k_r, const torch::Tensor& seg,
    const AttentionBias& bias, int64_t qlen, double scale,
    const AttentionDropout& dropout, const AttentionTiles& tiles = {});

// RelativeAttentionCore's contract (same arguments, same result up to
// rounding with dropout 0) through FusedRelativeAttention. `impl` must be
// kTiled (CPU tensors) or kCuda (CUDA tensors). In training with dropout > 0
// the seed is one draw from the default CPU generator (DrawCpuSeed), so
// activation checkpointing's replay and a resumed run draw the same masks;
// the masks are not those torch::dropout would draw for the unfused path.
torch::Tensor FusedRelativeAttentionCore(
    const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
    const torch::Tensor& k_r, const torch::Tensor& r_w_bias,
    const torch::Tensor& r_r_bias, const torch::Tensor& r_s_bias,
    const torch::Tensor& seg_embed, const AttentionBias& bias, int64_t qlen,
    double dropout, bool training, const AttentionOptions& options);

// The attention core that options.impl names, with RelativeAttentionCore's
// contract (relative_attention.h): queries q [B, H, Lq, Dh] against keys and
// values [B, H, K, Dh] and positions k_r [B, H, R, Dh] -> [B, H, Lq, Dh].
torch::Tensor AttentionCore(
    const AttentionOptions& options, const torch::Tensor& q,
    const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& k_r,
    const torch::Tensor& r_w_bias, const torch::Tensor& r_r_bias,
    const torch::Tensor& r_s_bias, const torch::Tensor& seg_embed,
    const AttentionBias& bias, int64_t qlen, double dropout, bool training);

}  // namespace xlnet
