#include "model/cuda/position_bias.h"

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <vector>

#include "model/cuda/position_bias_kernels.h"

namespace xlnet {
namespace {

namespace pb = position_bias;

struct BiasState : torch::CustomClassHolder {
  torch::Tensor mask;  // [B|1, 1, Lq, K] bool contiguous, or undefined
  torch::Tensor diff;  // [B|1, 1, Lq, K] bool contiguous, or undefined
  torch::Tensor pos;   // [B, Lq] int64 contiguous, or undefined
  int64_t qlen = 0, klen = 0;
  double scale = 1;
  bool has_seg = false;
};

pb::DType KernelDType(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat:
      return pb::DType::kFloat;
    case torch::kHalf:
      return pb::DType::kHalf;
    case torch::kBFloat16:
      return pb::DType::kBFloat16;
    default:
      TORCH_CHECK(false, "position bias: fp32, fp16 or bf16, got ", t);
  }
  return pb::DType::kFloat;
}

pb::Params MakeParams(const torch::Tensor& bd, const torch::Tensor& seg,
                      const BiasState& st) {
  pb::Params p;
  p.dtype = KernelDType(bd.scalar_type());
  p.b = bd.size(0);
  p.h = bd.size(1);
  p.lq = bd.size(2);
  p.rlen = bd.size(3);
  p.klen = st.klen;
  p.qlen = st.pos.defined() ? st.qlen : p.lq;
  p.bd = bd.data_ptr();
  if (st.has_seg) {
    p.seg = seg.data_ptr();
    p.diff = reinterpret_cast<const uint8_t*>(st.diff.data_ptr<bool>());
    p.diff_sb = st.diff.size(0) == 1 ? 0 : st.diff.stride(0);
  }
  if (st.mask.defined()) {
    p.mask = reinterpret_cast<const uint8_t*>(st.mask.data_ptr<bool>());
    p.mask_sb = st.mask.size(0) == 1 ? 0 : st.mask.stride(0);
  }
  if (st.pos.defined()) p.pos = st.pos.data_ptr<int64_t>();
  p.scale = static_cast<float>(st.scale);
  p.masked_value = static_cast<float>(MaskedScoreValue(bd.scalar_type()));
  return p;
}

struct PositionBiasFunction
    : public torch::autograd::Function<PositionBiasFunction> {
  // inputs: bd[, seg]
  static torch::autograd::variable_list forward(
      torch::autograd::AutogradContext* ctx, c10::intrusive_ptr<BiasState> st,
      at::TensorList inputs) {
    const auto bd = inputs[0].contiguous();
    const auto seg = st->has_seg ? inputs[1].contiguous() : torch::Tensor();
    const c10::cuda::CUDAGuard guard(bd.device());
    const pb::Params p = MakeParams(bd, seg, *st);
    auto bias = torch::empty({p.b, p.h, p.lq, p.klen},
                             bd.options());  // [B, H, Lq, K]
    C10_CUDA_CHECK(pb::Forward(
        p, bias.data_ptr(),
        c10::cuda::getCurrentCUDAStream(bd.device().index()).stream()));
    // Backward needs only shapes and the masks, not bd's values.
    ctx->saved_data["state"] = c10::IValue::make_capsule(st);
    ctx->saved_data["rlen"] = p.rlen;
    return {bias};
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grad_outputs) {
    auto st = c10::static_intrusive_pointer_cast<BiasState>(
        ctx->saved_data["state"].toCapsule());
    torch::autograd::variable_list result(st->has_seg ? 3 : 2);
    if (!grad_outputs[0].defined()) return result;
    const auto g = grad_outputs[0].contiguous();  // [B, H, Lq, K]
    const c10::cuda::CUDAGuard guard(g.device());
    const int64_t b = g.size(0), h = g.size(1), lq = g.size(2);
    const int64_t rlen = ctx->saved_data["rlen"].toInt();
    auto grad_bd = torch::empty({b, h, lq, rlen}, g.options());
    torch::Tensor grad_seg;
    if (st->has_seg) grad_seg = torch::empty({b, h, lq, 2}, g.options());
    // The gradients have bd's and seg's shapes and dtype, which is all the
    // backward kernel takes from p besides the masks (it reads no values
    // through p.bd or p.seg; p.seg only says a segment term exists).
    const pb::Params p = MakeParams(grad_bd, grad_seg, *st);
    C10_CUDA_CHECK(pb::Backward(
        p, g.data_ptr(), grad_bd.data_ptr(),
        st->has_seg ? grad_seg.data_ptr() : nullptr,
        c10::cuda::getCurrentCUDAStream(g.device().index()).stream()));
    result[1] = grad_bd;
    if (st->has_seg) result[2] = grad_seg;
    return result;
  }
};

}  // namespace

torch::Tensor CudaRelativePositionBias(const torch::Tensor& bd,
                                       const torch::Tensor& seg,
                                       const AttentionBias& bias, int64_t qlen,
                                       int64_t klen, double scale) {
  TORCH_CHECK(bd.is_cuda() && bd.dim() == 4,
              "position bias: bd must be a CUDA [B, H, Lq, R], got ",
              bd.sizes(), " on ", bd.device());
  const int64_t b = bd.size(0), lq = bd.size(2);
  TORCH_CHECK(seg.defined() == bias.seg_diff.defined(),
              "position bias: seg and seg_diff go together");
  TORCH_CHECK(
      !seg.defined() ||
          (seg.sizes().vec() == std::vector<int64_t>{b, bd.size(1), lq, 2} &&
           seg.scalar_type() == bd.scalar_type()),
      "position bias: seg ", seg.sizes(), " for bd ", bd.sizes());
  auto st = c10::make_intrusive<BiasState>();
  const auto rows = [&](const torch::Tensor& m, const char* name) {
    TORCH_CHECK(m.dim() == 4 && (m.size(0) == b || m.size(0) == 1) &&
                    m.size(1) == 1 && m.size(2) == lq && m.size(3) == klen,
                name, " must be [B|1, 1, ", lq, ", ", klen, "], got ",
                m.sizes());
    TORCH_CHECK(m.device() == bd.device(), name, " on ", m.device(), ", bd on ",
                bd.device());
    return m.to(torch::kBool).contiguous();
  };
  if (bias.mask.defined()) st->mask = rows(bias.mask, "mask");
  if (bias.seg_diff.defined()) st->diff = rows(bias.seg_diff, "seg_diff");
  if (bias.query_pos.defined()) {
    TORCH_CHECK(bias.query_pos.dim() == 2 && bias.query_pos.size(0) == b &&
                    bias.query_pos.size(1) == lq,
                "position bias: query_pos ", bias.query_pos.sizes(), " for bd ",
                bd.sizes());
    st->pos = bias.query_pos.to(torch::kLong).contiguous();
    TORCH_CHECK(bd.size(3) >= klen + qlen, "position bias: R ", bd.size(3),
                " < klen + qlen ", klen + qlen);
  } else {
    TORCH_CHECK(bd.size(3) >= klen + lq, "position bias: R ", bd.size(3),
                " < klen + Lq ", klen + lq);
  }
  st->qlen = qlen;
  st->klen = klen;
  st->scale = scale;
  st->has_seg = seg.defined();
  std::vector<torch::Tensor> inputs = {bd};
  if (seg.defined()) inputs.push_back(seg);
  return PositionBiasFunction::apply(st, at::TensorList(inputs))[0];
}

}  // namespace xlnet
