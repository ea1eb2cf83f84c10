#include "model/attention.h"

#include <torch/version.h>

#include <cmath>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "model/counter_dropout.h"
#include "model/fused_elementwise.h"
#include "model/relative_attention.h"
#include "model/sdpa_attention.h"
#include "model/tiled_attention.h"
#ifdef XLNET_CUDA_ATTENTION
#include "model/cuda/cuda_attention.h"
#endif

namespace xlnet {

bool CudaAttentionCompiled() {
#ifdef XLNET_CUDA_ATTENTION
  return true;
#else
  return false;
#endif
}

bool CudaTensorCoreAttentionCompiled() {
#ifdef XLNET_CUDA_TC_ATTENTION
  return true;
#else
  return false;
#endif
}

namespace {

// Whether attention 'cuda' runs the tensor-core kernels on `device` for a
// compute dtype and head size (their tc::SupportsHeadSize is 64).
bool TensorCoresTake(const torch::Device& device, torch::ScalarType dtype,
                     int64_t d_head) {
  const bool half = dtype == torch::kBFloat16 || dtype == torch::kHalf;
  return device.is_cuda() && half && d_head == 64 &&
         CudaTensorCoreAttentionCompiled();
}

}  // namespace

AttentionImpl ResolveAttention(AttentionImpl setting,
                               const torch::Device& device,
                               torch::ScalarType compute_dtype,
                               int64_t d_head) {
  if (setting != AttentionImpl::kAuto) return setting;
  return TensorCoresTake(device, compute_dtype, d_head)
             ? AttentionImpl::kCuda
             : AttentionImpl::kUnfused;
}

torch::Tensor PositionsForCore(AttentionImpl impl, const torch::Tensor& k_r,
                               torch::ScalarType dtype, int64_t b) {
  if (impl == AttentionImpl::kCuda &&
      TensorCoresTake(k_r.device(), dtype, k_r.size(3))) {
    return k_r;
  }
  return PositionsPerSample(k_r, b);
}

void PackAttentionBias(AttentionImpl impl, AttentionBias* bias) {
#ifdef XLNET_CUDA_TC_ATTENTION
  if (impl == AttentionImpl::kCuda) PackTensorCoreBits(bias);
#else
  (void)impl;
  (void)bias;
#endif
}

absl::Status CheckAttentionAvailable(AttentionImpl impl,
                                     const torch::Device& device) {
  switch (impl) {
    case AttentionImpl::kAuto:
      return absl::InvalidArgumentError(
          "train.attention: 'auto' is resolved before a model runs "
          "(ResolveAttention)");
    case AttentionImpl::kUnfused:
      return absl::OkStatus();
    case AttentionImpl::kTiled:
      if (device.is_cpu()) return absl::OkStatus();
      return absl::InvalidArgumentError(absl::StrCat(
          "train.attention: 'tiled' is the CPU implementation; on ",
          device.str(), " use 'sdpa', 'cuda' or 'unfused'"));
    case AttentionImpl::kCuda:
      if (!CudaAttentionCompiled()) {
        return absl::InvalidArgumentError(
            "train.attention: 'cuda' needs a build with -DXLNET_WITH_CUDA=ON "
            "-DXLNET_CUDA_ATTENTION=ON; this build has no CUDA attention "
            "kernel");
      }
      if (device.is_cuda()) return absl::OkStatus();
      return absl::InvalidArgumentError(
          absl::StrCat("train.attention: 'cuda' runs on CUDA devices; on ",
                       device.str(), " use 'tiled' or 'unfused'"));
    case AttentionImpl::kSdpa:
      if (SdpaAvailable()) return absl::OkStatus();
      return absl::InvalidArgumentError(
          absl::StrCat("train.attention: 'sdpa' needs LibTorch >= 2.1 "
                       "(scaled_dot_product_attention); this build has ",
                       TORCH_VERSION, " (use 'unfused' or 'tiled')"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("train.attention: unknown value ", static_cast<int>(impl)));
}

torch::Tensor FusedRelativeAttention(
    const torch::Tensor& qw, const torch::Tensor& qr, const torch::Tensor& k,
    const torch::Tensor& v, const torch::Tensor& k_r, const torch::Tensor& seg,
    const AttentionBias& bias, int64_t qlen, double scale,
    const AttentionDropout& dropout, const AttentionTiles& tiles) {
  if (qw.is_cuda()) {
#ifdef XLNET_CUDA_ATTENTION
    TORCH_CHECK(dropout.p >= 0 && dropout.p < 1,
                "fused attention: dropout must be in [0, 1), got ", dropout.p);
    CheckFusedAttentionInputs(qw, qr, k, v, k_r, seg, bias, qlen);
    return CudaFusedRelativeAttention(qw, qr, k, v, k_r, seg, bias, qlen, scale,
                                      dropout);
#else
    TORCH_CHECK(false,
                "fused attention on CUDA tensors needs the kernel: build with "
                "-DXLNET_WITH_CUDA=ON -DXLNET_CUDA_ATTENTION=ON");
#endif
  }
  TORCH_CHECK(qw.device().is_cpu(),
              "fused attention: CPU or CUDA tensors expected, got ",
              qw.device());
  return TiledRelativeAttention(qw, qr, k, v, k_r, seg, bias, qlen, scale,
                                dropout, tiles);
}

torch::Tensor FusedRelativeAttentionCore(
    const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
    const torch::Tensor& k_r, const torch::Tensor& r_w_bias,
    const torch::Tensor& r_r_bias, const torch::Tensor& r_s_bias,
    const torch::Tensor& seg_embed, const AttentionBias& bias, int64_t qlen,
    double dropout, bool training, const AttentionOptions& options) {
  TORCH_CHECK(options.impl == AttentionImpl::kTiled ||
                  options.impl == AttentionImpl::kCuda,
              "FusedRelativeAttentionCore: impl '", EnumName(options.impl),
              "' is not the fused op (RelativeAttentionCore is 'unfused', "
              "SdpaRelativeAttentionCore 'sdpa')");
  const absl::Status available = CheckAttentionAvailable(options.impl, q.device());
  TORCH_CHECK(available.ok(), available.message());
  const int64_t b = q.size(0), h = q.size(1), lq = q.size(2), dh = q.size(3);
  // One dtype for the op: the compute dtype of k (bf16/fp16 under autocast),
  // as the unfused path's autocast matmuls see q + bias.
  const auto dtype = k.scalar_type();
  // q as rows [B Lq, H Dh]: a view of the projection's heads-last layout
  // (a copy otherwise), on which the bias additions and the segment
  // product are plain row operations, and whose gradients arrive in that
  // layout too (no transposing copies, no strided reductions).
  const auto rows = q.transpose(1, 2).reshape({b * lq, h * dh});
  const auto heads = [&](const torch::Tensor& x) {
    return x.view({b, lq, h, x.size(1) / h}).transpose(1, 2);  // [B, H, Lq, *]
  };
  const auto row_bias = [&](const torch::Tensor& t) {  // [H, X] -> [H X]
    return t.to(rows.scalar_type()).reshape({-1});
  };
  torch::Tensor qw_rows, qr_rows;  // [B Lq, H Dh] each
  if (options.fused_query_biases && BiasPairAvailable(rows.device())) {
    std::tie(qw_rows, qr_rows) =
        AddBiasPair(rows, r_w_bias.reshape({-1}), r_r_bias.reshape({-1}));
  } else {
    qw_rows = rows + row_bias(r_w_bias);
    qr_rows = rows + row_bias(r_r_bias);
  }
  auto qw = heads(qw_rows).to(dtype);  // [B, H, Lq, Dh]
  auto qr = heads(qr_rows).to(dtype);  // [B, H, Lq, Dh]
  torch::Tensor seg;
  if (bias.seg_diff.defined()) {
    // (q + r_s_bias) . seg_embed per head as one product with the
    // block-diagonal [H Dh, H 2] matrix of the heads' seg_embed, plus
    // r_s_bias . seg_embed [H, 2].
    const auto e = seg_embed.permute({1, 2, 0});  // [H, Dh, 2]
    // Made in fp32: LibTorch 1.13 has no bf16 eye on the CPU.
    const auto eye =
        torch::eye(h, e.options().dtype(torch::kFloat)).to(e.scalar_type());
    const auto blocks =
        (e.view({h, dh, 1, 2}) * eye.view({h, 1, h, 1}))  // [H, Dh, H, 2]
            .reshape({h * dh, h * 2});
    const auto bias_terms =
        (r_s_bias.unsqueeze(1) * seg_embed.transpose(0, 1))  // [H, 2, Dh]
            .sum(2);                                         // [H, 2]
    auto s = torch::matmul(rows, blocks);                    // [B Lq, H 2]
    seg = heads(s + bias_terms.to(s.scalar_type()).reshape({-1}))
              .to(dtype);  // [B, H, Lq, 2]
  }
  AttentionDropout drop;
  if (training && dropout > 0) {
    drop.p = dropout;
    drop.seed = DrawCpuSeed();
  }
  return FusedRelativeAttention(qw, qr, k, v.to(dtype), k_r.to(dtype), seg,
                                bias, qlen, 1.0 / std::sqrt(double(dh)), drop,
                                options.tiles);
}

torch::Tensor AttentionCore(
    const AttentionOptions& options, const torch::Tensor& q,
    const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& k_r,
    const torch::Tensor& r_w_bias, const torch::Tensor& r_r_bias,
    const torch::Tensor& r_s_bias, const torch::Tensor& seg_embed,
    const AttentionBias& bias, int64_t qlen, double dropout, bool training) {
  switch (options.impl) {
    case AttentionImpl::kAuto:
      break;  // resolved before a model runs (ResolveAttention)
    case AttentionImpl::kUnfused:
      return RelativeAttentionCore(q, k, v, k_r, r_w_bias, r_r_bias, r_s_bias,
                                   seg_embed, bias, qlen, dropout, training);
    case AttentionImpl::kSdpa:
      return SdpaRelativeAttentionCore(q, k, v, k_r, r_w_bias, r_r_bias,
                                       r_s_bias, seg_embed, bias, qlen, dropout,
                                       training);
    case AttentionImpl::kTiled:
    case AttentionImpl::kCuda:
      return FusedRelativeAttentionCore(q, k, v, k_r, r_w_bias, r_r_bias,
                                        r_s_bias, seg_embed, bias, qlen,
                                        dropout, training, options);
  }
  TORCH_CHECK(false, "AttentionCore: unknown impl ",
              static_cast<int>(options.impl));
}

}  // namespace xlnet
