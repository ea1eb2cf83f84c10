// The position-bias kernels compiled for the CPU (position_bias_emulated.h),
// in their own namespace (position_bias_emulated): a CUDA build links the
// real kernels into the same test. LibTorch comes first: the emulation's
// keyword macros are for the kernel source only.
#include "tests/model/cuda/position_bias_emulated.h"

#include <torch/torch.h>

#include "model/relative_attention.h"

#define XLNET_CUDA_EMULATION 1
#define position_bias position_bias_emulated
#include "model/cuda/position_bias_kernels.cu"

namespace xlnet::testing {
namespace {

namespace pb = ::xlnet::position_bias;

pb::DType KernelDType(torch::ScalarType t) {
  return t == torch::kFloat  ? pb::DType::kFloat
         : t == torch::kHalf ? pb::DType::kHalf
                             : pb::DType::kBFloat16;
}

// [B|1, 1, Lq, K] bool as the node keeps it: contiguous, and its batch
// stride (0 when broadcast).
int64_t BatchStride(const torch::Tensor& m) {
  return m.size(0) == 1 ? 0 : m.stride(0);
}

}  // namespace

EmulatedOutputs EmulatedPositionBias(const torch::Tensor& bd_in,
                                     const torch::Tensor& seg_in,
                                     const AttentionBias& bias, int64_t qlen,
                                     int64_t klen, double scale,
                                     const torch::Tensor& grad_bias) {
  const auto bd = bd_in.contiguous();
  const bool has_seg = seg_in.defined();
  const auto seg = has_seg ? seg_in.contiguous() : torch::Tensor();
  torch::Tensor mask, diff, pos;
  if (bias.mask.defined()) mask = bias.mask.to(torch::kBool).contiguous();
  if (has_seg) diff = bias.seg_diff.to(torch::kBool).contiguous();
  if (bias.query_pos.defined()) {
    pos = bias.query_pos.to(torch::kLong).contiguous();
  }
  // MakeParams (position_bias.cc) for a tensor of bd's shape and dtype and
  // one of seg's.
  auto params = [&](const torch::Tensor& b, const torch::Tensor& s) {
    pb::Params p;
    p.dtype = KernelDType(b.scalar_type());
    p.b = b.size(0);
    p.h = b.size(1);
    p.lq = b.size(2);
    p.rlen = b.size(3);
    p.klen = klen;
    p.qlen = pos.defined() ? qlen : p.lq;
    p.bd = b.data_ptr();
    if (has_seg) {
      p.seg = s.data_ptr();
      p.diff = reinterpret_cast<const uint8_t*>(diff.data_ptr<bool>());
      p.diff_sb = BatchStride(diff);
    }
    if (mask.defined()) {
      p.mask = reinterpret_cast<const uint8_t*>(mask.data_ptr<bool>());
      p.mask_sb = BatchStride(mask);
    }
    if (pos.defined()) p.pos = pos.data_ptr<int64_t>();
    p.scale = static_cast<float>(scale);
    p.masked_value = static_cast<float>(MaskedScoreValue(b.scalar_type()));
    return p;
  };
  EmulatedOutputs result;
  const int64_t b = bd.size(0), h = bd.size(1), lq = bd.size(2);
  auto out = torch::empty({b, h, lq, klen}, bd.options());
  if (pb::Forward(params(bd, seg), out.data_ptr(), nullptr) != cudaSuccess) {
    result.error = "forward: " + cuda_emulation::LastLaunchMessage();
    return result;
  }
  const auto g = grad_bias.to(bd.scalar_type()).contiguous();
  auto grad_bd = torch::empty_like(bd);
  torch::Tensor grad_seg;
  if (has_seg) grad_seg = torch::empty({b, h, lq, 2}, bd.options());
  if (pb::Backward(params(grad_bd, grad_seg), g.data_ptr(), grad_bd.data_ptr(),
                   has_seg ? grad_seg.data_ptr() : nullptr,
                   nullptr) != cudaSuccess) {
    result.error = "backward: " + cuda_emulation::LastLaunchMessage();
    return result;
  }
  result.tensors = {out, grad_bd};
  if (has_seg) result.tensors.push_back(grad_seg);
  return result;
}

}  // namespace xlnet::testing
