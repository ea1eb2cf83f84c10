#include "model/sdpa_attention.h"

#include <cmath>

#ifdef XLNET_CUDA_ATTENTION
#include "model/cuda/position_bias.h"
#endif

// SDPA with `scale` arrived in LibTorch 2.1.
#if TORCH_VERSION_MAJOR > 2 || \
    (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
#define XLNET_HAVE_SDPA 1
#endif

namespace xlnet {

bool SdpaAvailable() {
#ifdef XLNET_HAVE_SDPA
  return true;
#else
  return false;
#endif
}

torch::Tensor RelativePositionBias(const torch::Tensor& bd,
                                   const torch::Tensor& seg,
                                   const AttentionBias& bias, int64_t qlen,
                                   int64_t klen, double scale) {
  TORCH_CHECK(bd.dim() == 4, "position bias: bd must be [B, H, Lq, R], got ",
              bd.sizes());
  TORCH_CHECK(seg.defined() == bias.seg_diff.defined(),
              "position bias: seg and seg_diff go together");
#ifdef XLNET_CUDA_ATTENTION
  if (bd.is_cuda()) {
    return CudaRelativePositionBias(bd, seg, bias, qlen, klen, scale);
  }
#endif
  auto out = bias.query_pos.defined()
                 ? RelShiftAt(bd, bias.query_pos, qlen, klen)
                 : RelShift(bd, klen);  // [B, H, Lq, K]
  if (seg.defined()) {
    auto same = seg.narrow(3, 0, 1);                      // [B, H, Lq, 1]
    auto diff = seg.narrow(3, 1, 1);                      // [B, H, Lq, 1]
    out = out + torch::where(bias.seg_diff, diff, same);  // [B, H, Lq, K]
  }
  out = out * scale;
  if (bias.mask.defined()) {
    out = out.masked_fill(bias.mask, MaskedScoreValue(out.scalar_type()));
  }
  return out;
}

torch::Tensor SdpaRelativeAttentionCore(
    const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
    const torch::Tensor& k_r_groups, const torch::Tensor& r_w_bias,
    const torch::Tensor& r_r_bias, const torch::Tensor& r_s_bias,
    const torch::Tensor& seg_embed, const AttentionBias& bias, int64_t qlen,
    double dropout, bool training) {
  CheckAttentionCoreShapes(q, k, v, k_r_groups);
#ifndef XLNET_HAVE_SDPA
  (void)r_w_bias, (void)r_r_bias, (void)r_s_bias, (void)seg_embed;
  (void)bias, (void)qlen, (void)dropout, (void)training;
  TORCH_CHECK(false, "attention 'sdpa' needs LibTorch >= 2.1; this build has ",
              TORCH_VERSION_MAJOR, ".", TORCH_VERSION_MINOR,
              " (use 'unfused' or 'tiled')");
  return {};
#else
  const auto k_r =
      PositionsPerSample(k_r_groups, q.size(0));  // [B|1, H, R, Dh]
  const int64_t dh = q.size(3);
  const int64_t klen = k.size(2);
  // One compute dtype: k's (bf16/fp16 under autocast), as the unfused
  // path's autocast matmuls see q + bias.
  const auto dtype = k.scalar_type();
  const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
  // Position term: [B, H, Lq, Dh] x [Bp, H, Dh, R] -> [B, H, Lq, R].
  auto bd = torch::matmul(AddHeadBias(q, r_r_bias).to(dtype),
                          k_r.to(dtype).transpose(2, 3));
  torch::Tensor seg;
  if (bias.seg_diff.defined()) {
    seg = SegmentScores(q, r_s_bias, seg_embed).to(dtype);  // [B, H, Lq, 2]
  }
  // A query row that may see no key gets a zero output (as in
  // RelativeAttentionCore). SDPA never sees such a row fully masked: the
  // memory-efficient kernel is reported to return NaN for rows whose every
  // bias is a huge negative (pytorch/pytorch#110213, #103963), and a bf16
  // test case containing such rows gave NaN gradients on the H100 (the
  // likely cause; not isolated there, and this change has not run on a
  // GPU). The row attends to every key instead and its output (hence its
  // gradient) is zeroed below.
  AttentionBias sdpa_bias = bias;
  torch::Tensor none_visible;
  if (bias.mask.defined()) {
    none_visible = bias.mask.all(3, /*keepdim=*/true);  // [B|1, 1, Lq, 1]
    sdpa_bias.mask = bias.mask.logical_and(none_visible.logical_not());
  }
  auto attn_bias = RelativePositionBias(bd, seg, sdpa_bias, qlen, klen,
                                        scale);  // [B, H, Lq, K]
  auto qw = AddHeadBias(q, r_w_bias).to(dtype);  // [B, H, Lq, Dh]
  auto out = at::scaled_dot_product_attention(
      qw, k, v.to(dtype), attn_bias, training ? dropout : 0.0,
      /*is_causal=*/false, scale);  // [B, H, Lq, Dh]
  if (none_visible.defined()) out = out.masked_fill(none_visible, 0.0);
  return out;
#endif
}

}  // namespace xlnet
