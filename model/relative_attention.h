// XLNet's relative multi-head attention: the sinusoidal relative positional
// encoding, rel_shift, the attention core shared by the content and query
// streams, and the RelativeAttention module (HF `XLNetRelativeAttention`).
//
// Letters (see model/README.md): B batch, L qlen, M mlen, K = M + L klen,
// R = K + L relative positions, P targets, D d_model, H n_head, Dh d_head.
// Internal layout is batch-first, heads before time: [B, H, Lq, Dh].
#pragma once

#include <torch/torch.h>

#include "config/config.h"
#include "model/attention_types.h"

namespace xlnet {

// HF's rel_shift_bnij: x [B, H, Lq, R] -> [B, H, Lq, klen] with
// out[.., i, j] = x[.., i, j + Lq - i] (reshape trick, differentiable).
torch::Tensor RelShift(const torch::Tensor& x, int64_t klen);

// The same shift for queries at arbitrary positions: x [B, H, P, R],
// query_pos [B, P] int64 (position of query p in 0..qlen-1), qlen = L.
// out[.., p, j] = x[.., p, j + qlen - query_pos[p]], j in [0, klen).
torch::Tensor RelShiftAt(const torch::Tensor& x, const torch::Tensor& query_pos,
                         int64_t qlen, int64_t klen);

// Sinusoidal relative positional encoding [Bp, R, D] (R = klen + qlen),
// positions klen, klen-1, ..., -qlen+1 as [sin(p f), cos(p f)] concatenated,
// f_k = 10000^(-2k/D), clamped to +-clamp_len when clamp_len > 0. Bp = 1, or 2
// with bi_data (row 0 forward, row 1 negated positions for the backward half
// of the batch). fp32 on `device`.
torch::Tensor RelativePositionalEncoding(int64_t qlen, int64_t klen,
                                         int64_t d_model, int64_t clamp_len,
                                         bool bi_data, torch::Device device);

// softmax(((q + r_w) k^T + shift((q + r_r) k_r^T) + ef) / sqrt(Dh)) v.
// q [B, H, Lq, Dh], k/v [B, H, K, Dh], k_r [B or 1, H, R, Dh], biases [H, Dh],
// seg_embed [2, H, Dh]. Scores are masked (large finite negative) and
// normalised in fp32 (fp64 for fp64 inputs); a query row with every key masked
// gets a zero output, never NaN (HF: a uniform average over masked keys).
// Returns [B, H, Lq, Dh] in v's dtype.
torch::Tensor RelativeAttentionCore(
    const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
    const torch::Tensor& k_r, const torch::Tensor& r_w_bias,
    const torch::Tensor& r_r_bias, const torch::Tensor& r_s_bias,
    const torch::Tensor& seg_embed, const AttentionBias& bias, int64_t qlen,
    double dropout, bool training);

// q + bias for q [B, H, Lq, Dh] and a per-head bias [H, Dh] (r_w_bias,
// r_r_bias, r_s_bias), the bias cast to q's dtype first: under autocast q is
// bf16/fp16 and an fp32 bias would promote the sum to an fp32
// [B, H, Lq, Dh] temporary that the next matmul casts back. (The bias is
// rounded to q's dtype before the sum instead of the sum after it: at most
// one rounding step of q's dtype apart.)
torch::Tensor AddHeadBias(const torch::Tensor& q, const torch::Tensor& bias);

// The segment scores (q + r_s_bias) seg_embed^T: q [B, H, Lq, Dh], r_s_bias
// [H, Dh], seg_embed [2, H, Dh] (same, different) -> [B, H, Lq, 2] in q's
// dtype.
torch::Tensor SegmentScores(const torch::Tensor& q,
                            const torch::Tensor& r_s_bias,
                            const torch::Tensor& seg_embed);

// The attention cores take k_r [G, H, R, Dh] for G groups of B / G
// consecutive samples (1: shared; 2: bi_data, the forward positions for
// the first half of the batch, the backward ones for the second; B: per
// sample). This gives [B, H, R, Dh] (k_r itself for G = 1 or B): a
// broadcast copy, its backward a sum over the copies, far cheaper on CUDA
// than index_select by a [B] index and its index_add backward. The
// tensor-core kernels take the groups as they are, without it.
torch::Tensor PositionsPerSample(const torch::Tensor& k_r, int64_t b);

// The shape checks of an attention core's inputs (RelativeAttentionCore,
// SdpaRelativeAttentionCore): q [B, H, Lq, Dh], k and v [B, H, K, Dh], k_r
// [G, H, R, Dh] with G dividing B (PositionsPerSample); TORCH_CHECK
// failures name the shapes.
void CheckAttentionCoreShapes(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v, const torch::Tensor& k_r);

// The value a masked score is replaced with: finite in every dtype.
double MaskedScoreValue(torch::ScalarType dtype);

// HF XLNetRelativeAttention with its parameters under HF names:
// q, k, v, o, r [D, H, Dh]; r_w_bias, r_r_bias, r_s_bias [H, Dh];
// seg_embed [2, H, Dh]; layer_norm.{weight,bias} [D].
class RelativeAttentionImpl : public torch::nn::Module {
 public:
  explicit RelativeAttentionImpl(const XLNetConfig& config);

  // Normal(0, initializer_range) weights and biases, LayerNorm ones/zeros.
  void ResetParameters(double initializer_range);

  // Projections of x [B, T, D] -> [B, H, T, Dh] with weight w [D, H, Dh].
  torch::Tensor Project(const torch::Tensor& x, const torch::Tensor& w) const;
  // Keys and values of x [B, K, D] in one product with k and v side by side
  // ([D, 2 * H * Dh], in x's dtype): {keys, values} [B, H, K, Dh], views of
  // the product's [B, K, 2, H, Dh] memory; gradients reach k and v.
  std::pair<torch::Tensor, torch::Tensor> ProjectKeysValues(
      const torch::Tensor& x) const;
  // k_r for pos_emb [Bp, R, D] -> [Bp, H, R, Dh].
  torch::Tensor ProjectPositions(const torch::Tensor& pos_emb) const;
  // LN(x + dropout(attn_vec o^T)), attn_vec [B, H, T, Dh], x [B, T, D].
  torch::Tensor PostAttention(const torch::Tensor& x,
                              const torch::Tensor& attn_vec);
  // With the fused ops only: PostAttention's {output, its copy in the
  // output projection's dtype} (DropoutResidualLayerNormWithCopy).
  std::pair<torch::Tensor, torch::Tensor> PostAttentionWithCopy(
      const torch::Tensor& x, const torch::Tensor& attn_vec);

  torch::Tensor q, k, v, o, r;
  torch::Tensor r_w_bias, r_r_bias, r_s_bias, seg_embed;
  torch::nn::LayerNorm layer_norm{nullptr};
  int64_t n_head;
  int64_t d_head;
  int64_t d_model;
  double dropout;
  // PostAttention's dropout from CounterDropout (attention 'tiled').
  bool counter_dropout = false;
  // PostAttention's dropout, residual add and LayerNorm as the fused
  // DropoutResidualLayerNorm (train.fused_elementwise).
  bool fused_elementwise = false;
};
TORCH_MODULE(RelativeAttention);

}  // namespace xlnet
